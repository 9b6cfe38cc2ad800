"""The served backend (``openai``): a model behind an OpenAI-compatible ``/v1/completions`` (vLLM, llama-cpp-python).

Scoring sends ``document start + sentence`` as text with ``echo: true``, ``logprobs: 1``, ``max_tokens: 1``,
``temperature: 0``; the server answers the log-probability of every prompt token, and the NLL is minus their sum
after the document start -- the HF backend's definition (first token predicted from the document start). Texts are
re-tokenized by the server, so every answer's token count is checked against the local tokenizer.

Servers differ in how they list the prompt (measured, docs/engine.md "Served models"):
- vLLM lists every prompt token, the first (the document start) with a null log-prob: layout ``full``.
- llama-cpp-python (>= 0.3, model loaded with ``logits_all``) drops a leading BOS from the listing and nulls the
  first token after it (the OpenAI convention for the first echoed token): layout ``stripped``. Its log-probs are
  aligned only when the prompt starts with the model's BOS, so the server must treat the document start as BOS
  (``--kv_overrides tokenizer.ggml.bos_token_id=int:<id>`` when they differ). The missing first log-prob is read from
  one full next-token distribution after the document start (a 1-token completion with ``logprobs`` = vocabulary
  size, keyed by token text; asked once at load).
Load-time checks refuse a server that would give wrong numbers: prompt log-probs missing or partial (llama.cpp's own
server returns the generated token's only), a token count or token text that disagrees with the local tokenizer,
shifted log-probs (a prompt token's echoed log-prob must equal the one the server reports when it generates that
token), and, when a local copy is registered (``reference``), probe NLLs that differ from the HF backend's.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.settings import ModelSpec, Settings
from workers.lm.base import (
    PROBE_PAIRS,
    ModelLoadError,
    ProgressCallback,
    ScoringError,
    SentenceTooLong,
    ServerUnavailable,
    check_not_empty,
    plain_ids,
)
from workers.lm.registry import ModelSource
from workers.lm.served_client import ServedClient

log = logging.getLogger(__name__)

ALIGNMENT_TOLERANCE = 0.1  # nats: same server, same position, two code paths (echo vs generation); a shift is >1
ALIGNMENT_PREFIXES = ("The capital of France is", "Water boils at one hundred", "The capital of Fra", "One, two,")
Listing = tuple[list[str], list[float | None]]  # the prompt's token texts and log-probs as the server lists them


class ServedScorer:
    """Scorer over an OpenAI-compatible server. See workers.lm.base.Scorer for the contract."""

    def __init__(self, name: str, spec: ModelSpec, client: ServedClient, tokenizer: Any, start_id: int) -> None:
        self.name = name
        self.served_model = str(spec.served_model)
        self.client = client
        self.tokenizer = tokenizer
        self.document_start_id = start_id
        self.document_start = tokenizer.convert_ids_to_tokens(start_id)
        # The document start as text (servers parse special tokens in prompts), unless the tokenizer prepends it by
        # itself (Llama-style BOS): then vLLM (add_special_tokens) and llama.cpp (add_bos_token) prepend it too.
        auto = tokenizer("a", add_special_tokens=True)["input_ids"]
        prepends = len(auto) > len(tokenizer("a", add_special_tokens=False)["input_ids"]) and auto[0] == start_id
        self.prompt_prefix = "" if prepends else self.document_start
        self.batch_size = 1  # prompts per request: one until _detect_batching finds the server takes a list
        self.wanted_batch = spec.batch_size
        self.layout = "full"
        self.first: dict[int, float] | None = None  # log p(token | document start), when the server nulls it
        self.max_length = 0
        self.fingerprint = ""
        self.reference_gap: float | None = None
        specials = set(tokenizer.all_special_ids)
        self.texts = [None if i in specials else _decode(tokenizer, i) for i in range(len(tokenizer))]

    @classmethod
    def load(cls, name: str, spec: ModelSpec, source: ModelSource | None, settings: Settings) -> ServedScorer:
        from workers.lm.loading import find_document_start

        for field in ("base_url", "served_model"):
            if not getattr(spec, field):
                raise ModelLoadError(
                    f"model {name!r}: backend 'openai' needs {field} (MEMAUDIT_MODELS__{name}__{field.upper()})"
                )
        tokenizer = _tokenizer(name, spec, settings)
        start_id = find_document_start(tokenizer)
        if start_id is None:
            raise ModelLoadError(f"model {name!r}: its tokenizer has no BOS token and no <|endoftext|> separator")
        key = spec.api_key.get_secret_value() if spec.api_key else None
        client = ServedClient(name, str(spec.base_url), key, spec.timeout, spec.retries, spec.concurrency)
        scorer = cls(name, spec, client, tokenizer, start_id)
        try:
            scorer._check(spec, settings)
        except ScoringError as exc:  # the server failed a check or did not answer: a load failure
            client.close()
            raise ModelLoadError(str(exc)) from exc
        except ModelLoadError:
            client.close()
            raise
        return scorer

    # -- load-time checks ---------------------------------------------------------------------------------------
    def _check(self, spec: ModelSpec, settings: Settings) -> None:
        self.max_length = self._context_length(spec)
        probes = self._ids([p + c for p, c in PROBE_PAIRS])
        texts = [self.prompt_prefix + p + c for p, c in PROBE_PAIRS]
        try:  # the first prompt-log-prob request: a server that refuses it (HTTP 4xx/5xx) is told why
            first = self._echo(texts[:1])
        except ServerUnavailable as exc:
            if not exc.status.startswith("HTTP"):
                raise
            raise ModelLoadError(
                f"model {self.name!r}: the server refuses requests for prompt log-probs (echo + logprobs, "
                f"{exc.status}); llama-cpp-python computes them only with --logits_all true"
            ) from exc
        self._detect_layout(first[0], probes[0])
        listings = first + self._echo_all(texts[1:])
        pairs = list(zip(probes, listings, strict=True))
        for index, (seq, listing) in enumerate(pairs):
            tokens, values = self._prompt_part(index, seq, listing)
            if not self._same_texts(seq[1:], tokens):
                raise ModelLoadError(
                    f"model {self.name!r}: the server tokenizes probe #{index} differently from the local "
                    "tokenizer; set tokenizer to the served model's"
                )
            if values[0] is None and self.first is None:
                self.first = self._first_token_table()
        nlls = [-sum(self._logprobs(i, s, ls)) for i, (s, ls) in enumerate(zip(probes, listings, strict=True))]
        self._check_alignment()
        self.batch_size = self._detect_batching()
        if spec.reference:
            self.reference_gap = self._compare_reference(spec, settings, nlls)
        self.fingerprint = self._fingerprint(nlls)
        log.info(
            "model %s: served at %s, layout %s, %d prompt(s) per request, first token from %s",
            self.name,
            self.client.where,
            self.layout,
            self.batch_size,
            "the echo" if self.first is None else "the document start's distribution",
        )

    def _context_length(self, spec: ModelSpec) -> int:
        """Usable length (the scoring request generates one token): the spec's, else the server's model card's."""
        cards = [c for c in _field(self.client.get("/models"), "data", []) if isinstance(c, dict)]
        names = [str(c.get("id")) for c in cards]
        if self.served_model not in names:
            raise ModelLoadError(
                f"model {self.name!r}: the server at {self.client.where} serves "
                f"{', '.join(names) or 'no model'}, not {self.served_model!r}; set served_model"
            )
        card = cards[names.index(self.served_model)]
        context = spec.max_length or card.get("max_model_len")
        if not isinstance(context, int) or context < 2:
            raise ModelLoadError(f"model {self.name!r}: the server does not say its context length; set max_length")
        return context - 1

    def _detect_layout(self, listing: Listing, seq: list[int]) -> None:
        """``full`` lists the document start first; ``stripped`` starts at the first token after it. A generated
        token may follow the prompt's, so the token texts decide."""
        tokens, values = listing
        n = len(seq) - 1  # tokens after the document start
        for layout, start in (("full", 1), ("stripped", 0)):
            fits = len(tokens) in (start + n, start + n + 1) and len(values) == len(tokens)
            if fits and self._same_texts(seq[1:], tokens[start : start + n]):
                self.layout = layout
                return
        raise ModelLoadError(
            f"model {self.name!r}: the server listed {len(tokens)} token(s) for a probe of {n} token(s) after the "
            "document start: it returns no prompt log-probs (llama.cpp's own server returns the generated token's "
            "only; llama-cpp-python needs logits_all) or tokenizes differently from the local tokenizer"
        )

    def _detect_batching(self) -> int:
        """Several prompts per request where the server takes a list (vLLM); one otherwise (llama-cpp-python)."""
        if self.wanted_batch == 1:
            return 1
        texts = [self.prompt_prefix + p + c for p, c in PROBE_PAIRS[:2]]
        try:
            choices = _field(self.client.post("/completions", self._score_body(texts), retry=False), "choices", [])
        except ScoringError:
            choices = None
        if isinstance(choices, list) and len(choices) == len(texts):
            return self.wanted_batch
        log.info("model %s: the server takes one prompt per request", self.name)
        return 1

    def _first_token_table(self) -> dict[int, float]:
        """log p(token | document start) for every token whose text is unambiguous, from one completion of the
        document start with the full distribution (``logprobs`` = vocabulary size)."""
        body = {**self._common(), "prompt": self.prompt_prefix, "max_tokens": 1, "logprobs": len(self.texts)}
        top = (_field(self._first_choice(body), "logprobs", {}).get("top_logprobs") or [None])[0]
        if not isinstance(top, dict) or len(top) < len(set(self.texts)) // 2:
            raise ModelLoadError(
                f"model {self.name!r}: the server nulls the first prompt token's log-prob and caps "
                "the distribution it returns, so a sentence's first token cannot be scored"
            )
        counts = Counter(self.texts)
        table = {
            i: float(top[t])
            for i, t in enumerate(self.texts)
            if t and counts[t] == 1 and "\ufffd" not in t and t in top
        }
        if len(table) < 0.9 * sum(1 for t in self.texts if t and counts[t] == 1 and "\ufffd" not in t):
            raise ModelLoadError(f"model {self.name!r}: the server's token texts differ from the local tokenizer's")
        return table

    def _same_texts(self, ids: Sequence[int], texts: Sequence[str]) -> bool:
        """Token by token, the server's text is the local tokenizer's (spaces and undecodable bytes aside)."""
        for token_id, text in zip(ids, texts, strict=True):
            local = self.texts[token_id]
            if local is not None and "\ufffd" not in local and str(text).strip() != local.strip():
                return False
        return True

    def _check_alignment(self) -> None:
        """Echoed log-prob of a token == the log-prob the server gives when it generates that token."""
        worst, usable = 0.0, 0
        for prefix in ALIGNMENT_PREFIXES:
            body = {**self._common(), "prompt": self.prompt_prefix + prefix, "max_tokens": 1, "logprobs": 1}
            choice = self._first_choice(body)
            generated = (_field(choice, "logprobs", {}).get("token_logprobs") or [None])[0]
            text = str(choice.get("text") or "")
            ids, extended = self._encode([prefix, prefix + text])
            if generated is None or len(extended) != len(ids) + 1 or extended[: len(ids)] != ids:
                continue  # the generated text re-tokenizes differently after the prefix: not a usable probe
            echoed = self._logprobs(
                0, [self.document_start_id, *extended], self._echo([self.prompt_prefix + prefix + text])[0]
            )
            worst, usable = max(worst, abs(echoed[-1] - float(generated))), usable + 1
        if usable == 0 or worst > ALIGNMENT_TOLERANCE:
            reason = "no probe could be checked" if usable == 0 else f"they differ by {worst:.2f} nats"
            raise ModelLoadError(
                f"model {self.name!r}: the server's prompt log-probs are not aligned with its tokens ({reason}); "
                "llama-cpp-python aligns them only when the prompt starts with its BOS: start it with --kv_overrides "
                f"tokenizer.ggml.bos_token_id=int:{self.document_start_id}"
            )

    def _compare_reference(self, spec: ModelSpec, settings: Settings, nlls: list[float]) -> float:
        from workers.lm.registry import load_scorer

        reference = load_scorer(str(spec.reference), settings)
        if reference.document_start != self.document_start:
            raise ModelLoadError(
                f"model {self.name!r}: its reference {spec.reference!r} starts documents with "
                f"{reference.document_start!r}, this tokenizer with {self.document_start!r}"
            )
        gap = max(abs(a - b) for a, b in zip(nlls, reference.score(PROBE_PAIRS), strict=True))
        if gap > spec.reference_tolerance:
            raise ModelLoadError(
                f"model {self.name!r}: the server's probe NLLs differ from the local copy "
                f"{spec.reference!r} by {gap:.3f} nats (> reference_tolerance "
                f"{spec.reference_tolerance}); is it the same model?"
            )
        log.info("model %s: probe NLLs within %.4f nats of %s", self.name, gap, spec.reference)
        return gap

    def _fingerprint(self, nlls: list[float]) -> str:
        """The server, the model name, the tokenizer and the probe NLLs (to 0.1 nat: a different model behind the
        same name changes them; the server's own numeric noise does not)."""
        vocab = hashlib.sha256(repr(sorted(self.tokenizer.get_vocab().items())).encode()).hexdigest()
        probes = ",".join(f"{v:.1f}" for v in nlls)
        text = f"openai|{self.client.where}|{self.served_model}|{self.document_start_id}|{vocab}|{probes}"
        return hashlib.sha256(text.encode()).hexdigest()

    # -- requests -----------------------------------------------------------------------------------------------
    def _common(self) -> dict[str, Any]:
        # repeat_penalty: llama-cpp-python's default is 1.1, which would change greedy decoding (vLLM ignores it)
        return {"model": self.served_model, "temperature": 0.0, "repeat_penalty": 1.0}

    def _score_body(self, texts: list[str]) -> dict[str, Any]:
        prompt: str | list[str] = texts if len(texts) > 1 else texts[0]
        return {**self._common(), "prompt": prompt, "max_tokens": 1, "echo": True, "logprobs": 1}

    def _echo(self, texts: list[str], retry: bool = True) -> list[Listing]:
        answer = self.client.post("/completions", self._score_body(texts), retry=retry)
        choices = self._choices(answer, len(texts))
        listings = []
        for choice in choices:
            logprobs = _field(choice, "logprobs", {})
            tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
            if not isinstance(tokens, list) or not isinstance(values, list):
                raise ScoringError(f"model {self.name!r}: the server returned no prompt log-probs")
            listings.append((tokens, values))
        return listings

    def _echo_all(self, texts: list[str]) -> list[Listing]:
        batches = [texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        return [listing for batch in self.client.map(self._echo, batches) for listing in batch]

    def _first_choice(self, body: dict[str, Any]) -> dict[str, Any]:
        choices = _field(self.client.post("/completions", body), "choices", [])
        return choices[0] if choices and isinstance(choices[0], dict) else {}

    def _choices(self, answer: Any, n: int) -> list[dict[str, Any]]:
        choices = [c for c in _field(answer, "choices", []) if isinstance(c, dict)]
        if len(choices) != n:
            raise ScoringError(f"model {self.name!r}: the server answered {n} prompt(s) with a malformed reply")
        return sorted(choices, key=lambda c: int(c.get("index", 0)))

    # -- tokens -------------------------------------------------------------------------------------------------
    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        return plain_ids(self.tokenizer, texts)

    def _ids(self, texts: Sequence[str], extra: int = 0) -> list[list[int]]:
        """Document start + tokens of each text; SentenceTooLong (by index) before any request."""
        seqs = [[self.document_start_id, *ids] for ids in self._encode(texts)]
        for index, seq in enumerate(seqs):
            if len(seq) + extra > self.max_length:
                raise SentenceTooLong(index, len(seq) + extra, self.max_length)
        return seqs

    def _prompt_part(self, index: int, seq: list[int], listing: Listing) -> Listing:
        """The listing's entries for the tokens after the document start (a generated token may follow them)."""
        tokens, values = listing
        start = 1 if self.layout == "full" else 0
        n = len(seq) - 1
        if len(tokens) not in (start + n, start + n + 1) or len(values) != len(tokens):
            raise ScoringError(
                f"model {self.name!r}: the server tokenized sentence #{index} into "
                f"{len(tokens) - start} token(s), the local tokenizer into {n}: its NLL would not "
                "be exact"
            )
        return tokens[start : start + n], values[start : start + n]

    def _logprobs(self, index: int, seq: list[int], listing: Listing) -> list[float]:
        _, values = self._prompt_part(index, seq, listing)
        out = []
        for position, value in enumerate(values):
            if value is None and position == 0 and self.first is not None:
                value = self.first.get(seq[1])
                if value is None:
                    raise ScoringError(
                        f"sentence #{index} starts with a token whose log-prob this server cannot "
                        "report (its text is ambiguous); score this model with a vLLM server"
                    )
            if value is None:
                raise ScoringError(
                    f"model {self.name!r}: the server returned partial prompt log-probs "
                    f"(sentence #{index}, position {position + 1})"
                )
            out.append(float(value))
        return out

    # -- the Scorer interface -----------------------------------------------------------------------------------
    def score(self, pairs: Sequence[tuple[str, str]], *, on_progress: ProgressCallback | None = None) -> list[float]:
        check_not_empty(pairs)
        if not pairs:
            return []
        seqs = self._ids([prefix + continuation for prefix, continuation in pairs])
        listings = self._echo_all([self.prompt_prefix + p + c for p, c in pairs])
        out = [-sum(self._logprobs(i, seq, ls)) for i, (seq, ls) in enumerate(zip(seqs, listings, strict=True))]
        if on_progress is not None:  # one report per call: the server batches, we see no finer steps
            on_progress(len(pairs))
        return out

    def generate(self, prompts: Sequence[str], max_new_tokens: int, stop: str = "\n") -> list[str]:
        """Greedy (temperature 0, no repetition penalty); text cut before the first ``stop``."""
        if not prompts:
            return []
        self._ids(prompts, extra=max_new_tokens)
        texts = [self.prompt_prefix + p for p in prompts]
        batches = [texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        outs = [
            text
            for batch in self.client.map(self._complete, [(b, max_new_tokens, stop) for b in batches])
            for text in batch
        ]
        return [text.split(stop, 1)[0] if stop else text for text in outs]

    def _complete(self, job: tuple[list[str], int, str]) -> list[str]:
        texts, max_new_tokens, stop = job
        body = {**self._common(), "prompt": texts if len(texts) > 1 else texts[0], "max_tokens": max_new_tokens}
        if stop:
            body["stop"] = [stop]
        return [str(c.get("text") or "") for c in self._choices(self.client.post("/completions", body), len(texts))]


def _field(answer: Any, key: str, default: Any) -> Any:
    """answer[key] when the server's JSON has it with the default's type; else the default (never a crash)."""
    value = answer.get(key) if isinstance(answer, dict) else None
    return value if isinstance(value, type(default)) else default


def _decode(tokenizer: Any, token_id: int) -> str:
    return tokenizer.decode([token_id], clean_up_tokenization_spaces=False)


def _tokenizer(name: str, spec: ModelSpec, settings: Settings) -> Any:
    """The local tokenizer: ``tokenizer`` (a directory, a cached hub id or a .gguf file), else the reference's."""
    from workers.lm.loading import load_tokenizer
    from workers.lm.registry import resolve_source, resolve_spec

    if spec.tokenizer:
        path = Path(spec.tokenizer).expanduser()
        if path.suffix == ".gguf" and path.is_file():
            source = ModelSource(location=str(path.parent), directory=path.parent, gguf_file=path.name)
        else:
            source = resolve_source(name, ModelSpec(path=spec.tokenizer))
    elif spec.reference:
        source = resolve_source(str(spec.reference), resolve_spec(str(spec.reference), settings))
    else:
        raise ModelLoadError(
            f"model {name!r}: backend 'openai' needs a local tokenizer: set tokenizer (a directory "
            "or .gguf file) or reference (a registered local copy of the model)"
        )
    return load_tokenizer(name, source)
