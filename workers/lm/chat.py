"""Generators for models served elsewhere (issue 41's generation mode): backend ``openai-chat`` asks an
OpenAI-compatible ``/v1/chat/completions`` (``Prompt.messages``; a prompt given only as text is sent as one user
message), backend ``openai`` its ``/v1/completions`` without echo (``Prompt.text``; a prompt given only as messages
is sent as their contents, one per line).

Each prompt is one request asking ``n`` answers (``n``, ``temperature``, ``seed``, ``max_tokens``, ``stop``; the
generated tokens' log-probs where asked). A server that ignores ``n`` (llama-cpp-python's answers one choice) is
asked again, one answer per request, the k-th with ``seed + k``. A reply that is not JSON, has no choices or the wrong
number of them is retried like a 5xx (workers.lm.served_client), then the call fails with ServerUnavailable naming the
endpoint and the defect. Every request sent, retries included, counts in ``usage.queries`` (and a spent ``budget``
stops it before it is sent); tokens come from the replies' ``usage``.

``seeded`` is measured at load (at temperature 1: two repeats with one seed agree, another seed differs); the load's
requests are not counted. A server that honours seeds may still answer a prompt differently the first time it sees
it (llama-cpp-python: its prompt cache), so "reproducible" means: the same requests in the same order.

Messages and logs name the endpoint (its public URL), the prompt's index and the defect: never a prompt, an answer
or the API key (which lives only in the HTTP client's headers).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.settings import ModelSpec, Settings
from workers.lm.base import ModelLoadError, ProgressCallback, ScoringError, ServerUnavailable
from workers.lm.generation import Prompt, Sample, Usage
from workers.lm.served_client import Malformed, ServedClient, public_url

log = logging.getLogger(__name__)

PATHS = {"openai-chat": "/chat/completions", "openai": "/completions"}
SEED_PROBE = Prompt(messages=({"role": "user", "content": "Write one random word."},), text="A random word:")
SEED_PROBE_TOKENS = 12
SEED_RANGE = 2**31  # seeds sent modulo this: servers take 32-bit seeds (llama.cpp's are unsigned 32-bit)


class _Skipped(Exception):  # noqa: N818
    """A prompt not asked because another one of the call failed first."""


@dataclass(frozen=True)
class Params:
    """One call's sampling settings (the same for every prompt of the call)."""

    temperature: float
    max_tokens: int
    top_logprobs: int
    stop: tuple[str, ...]


class ServedGenerator:
    """A Generator over an OpenAI-compatible endpoint. See workers.lm.generation.Generator for the contract;
    ``sample`` also takes ``stop`` (strings that end an answer, the server cuts them off)."""

    def __init__(self, name: str, spec: ModelSpec, api_key: str | None) -> None:
        self.name = name
        self.backend = spec.backend
        self.path = PATHS[spec.backend]
        self.served_model = str(spec.served_model)
        self.where = public_url(str(spec.base_url))
        self.usage = Usage()
        self.seeded = False
        self.honours_n: bool | None = None  # unknown until a request asks for more than one answer
        self._n_lock = threading.Lock()
        text = f"{spec.backend}|{self.where}|{self.served_model}"
        self.fingerprint = hashlib.sha256(text.encode()).hexdigest()
        self.client = ServedClient(
            name,
            str(spec.base_url),
            api_key,
            spec.timeout,
            spec.retries,
            spec.concurrency,
            rate=spec.requests_per_second,
            on_request=lambda: self.usage.add(queries=1),
            resume="",
        )

    def __repr__(self) -> str:
        return f"ServedGenerator({self.name!r}, {self.where}{self.path})"

    def close(self) -> None:
        self.client.close()

    def sample(
        self,
        prompts: Sequence[Prompt],
        n: int,
        *,
        temperature: float,
        max_tokens: int,
        seed: int,
        top_logprobs: int = 0,
        on_progress: ProgressCallback | None = None,
        stop: Sequence[str] = (),
    ) -> list[list[Sample]]:
        if n < 1 or max_tokens < 1:
            raise ValueError("n and max_tokens must be at least 1")
        params = Params(temperature, max_tokens, top_logprobs, tuple(stop))
        bodies = [self._body(index, prompt, params) for index, prompt in enumerate(prompts)]
        failures: list[BaseException] = []  # the first failure stops the prompts not yet asked

        def ask(job: tuple[int, dict[str, Any]]) -> list[Sample]:
            if failures:
                raise _Skipped
            try:
                samples = self._ask(job[0], job[1], n, seed, params)
            except BaseException as exc:
                failures.append(exc)
                raise
            self.usage.add(prompts=1, samples=len(samples))
            return samples

        try:
            return self.client.map(ask, enumerate(bodies), on_done=on_progress)
        except _Skipped:
            raise failures[0] from None

    # -- requests -----------------------------------------------------------------------------------------------
    def _body(self, index: int, prompt: Prompt, params: Params) -> dict[str, Any]:
        """The request for one prompt, without ``n`` and ``seed``."""
        if not prompt.messages and not prompt.text:
            raise ScoringError(f"model {self.name!r}: prompt #{index} is empty (neither messages nor text)")
        body: dict[str, Any] = {
            "model": self.served_model,
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if self.backend == "openai-chat":
            messages = prompt.messages or ({"role": "user", "content": str(prompt.text)},)
            body["messages"] = [dict(m) for m in messages]
            if params.top_logprobs:
                body |= {"logprobs": True, "top_logprobs": params.top_logprobs}
        else:
            body["prompt"] = prompt.text if prompt.text else "\n".join(m["content"] for m in prompt.messages)
            if params.top_logprobs:
                body["logprobs"] = params.top_logprobs
        return body

    def _ask(self, index: int, body: dict[str, Any], n: int, seed: int, params: Params) -> list[Sample]:
        """``n`` answers to one prompt: one request asking n, or n requests when the server ignores ``n``."""
        try:
            if n == 1 or self.honours_n is False:
                return [s for k in range(n) for s in self._request(body, 1, seed + k, params)]
            samples = self._request(body, n, seed, params)
            if len(samples) == n:
                self.honours_n = True
                return samples
            with self._n_lock:
                if self.honours_n is None:
                    log.info("model %s: the server at %s ignores n: one request per answer", self.name, self.where)
                self.honours_n = False
            return samples + [s for k in range(1, n) for s in self._request(body, 1, seed + k, params)]
        except ServerUnavailable as exc:
            raise ServerUnavailable(f"{exc} (prompt #{index})", exc.status) from exc

    def _request(self, body: dict[str, Any], n: int, seed: int, params: Params) -> list[Sample]:
        def read(answer: Any) -> tuple[list[Sample], dict[str, Any]]:
            return self._read(answer, n, params), answer.get("usage") or {}

        request = {**body, "n": n, "seed": seed % SEED_RANGE}
        samples, usage = self.client.post(self.path, request, read=read)
        tokens = {k: usage.get(k) for k in ("completion_tokens", "prompt_tokens")} if isinstance(usage, dict) else {}
        self.usage.add(**{k: v for k, v in tokens.items() if isinstance(v, int) and v >= 0})
        return samples

    def _read(self, answer: Any, n: int, params: Params) -> list[Sample]:
        """The answers of one reply, in choice order; Malformed (a retry) when the reply is not one."""
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
            raise Malformed("a reply without choices")
        # a server that ignores n answers one; any other count is a broken reply
        if len(choices) != n and not (len(choices) == 1 and n > 1 and self.honours_n is not True):
            raise Malformed(f"{len(choices)} answer(s) where {n} were asked")
        choices = sorted(choices, key=lambda c: c.get("index") if isinstance(c.get("index"), int) else 0)
        return [self._sample(choice, params) for choice in choices]

    def _sample(self, choice: dict[str, Any], params: Params) -> Sample:
        if self.backend == "openai-chat":
            message = choice.get("message")
            # a chat answer whose content is null (a refusal or a tool call): an empty answer
            text = (message.get("content") or "") if isinstance(message, dict) else None
        else:
            text = choice.get("text")
        if not isinstance(text, str):
            raise Malformed("an answer without text")
        top = _top_logprobs(choice.get("logprobs"), self.backend) if params.top_logprobs else None
        return Sample(text, top)


def _top_logprobs(logprobs: Any, backend: str) -> tuple[dict[str, float], ...] | None:
    """Per generated token, its alternatives -> log-prob, most likely first; None when the server gave none.
    Chat: ``logprobs.content[i].top_logprobs`` = [{token, logprob}]; completions: ``logprobs.top_logprobs[i]`` =
    {token: logprob}."""
    if not isinstance(logprobs, dict):
        return None
    if backend == "openai-chat":
        content = logprobs.get("content")
        if not isinstance(content, list):
            return None
        steps = [
            {str(t.get("token")): t.get("logprob") for t in item.get("top_logprobs") or [] if isinstance(t, dict)}
            for item in content
            if isinstance(item, dict)
        ]
    else:
        listed = logprobs.get("top_logprobs")
        if not isinstance(listed, list):
            return None
        steps = [dict(step) if isinstance(step, dict) else {} for step in listed]
    return tuple(
        dict(sorted(((k, float(v)) for k, v in step.items() if isinstance(v, int | float)), key=lambda kv: -kv[1]))
        for step in steps
    )


def load_generator(name: str, spec: ModelSpec, settings: Settings) -> ServedGenerator:
    """The generator of a served model; ModelLoadError (naming the model and the fix) when its entry lacks the
    endpoint, the server refuses the key or does not answer."""
    for field in ("base_url", "served_model"):
        if not getattr(spec, field):
            raise ModelLoadError(
                f"model {name!r}: backend {spec.backend!r} needs {field} (MEMAUDIT_MODELS__{name}__{field.upper()})"
            )
    if spec.backend not in PATHS:
        raise ModelLoadError(f"model {name!r}: backend {spec.backend!r} is not served (known: {', '.join(PATHS)})")
    generator = ServedGenerator(name, spec, spec.api_key.get_secret_value() if spec.api_key else None)
    try:
        generator.seeded = _honours_seed(generator)
    except ScoringError as exc:  # the server refused the key, has no such endpoint or did not answer
        generator.close()
        raise ModelLoadError(str(exc)) from exc
    generator.usage = Usage()  # the load's requests are not the audit's
    log.info(
        "model %s: served at %s%s, seeds %s",
        name,
        generator.where,
        generator.path,
        "honoured" if generator.seeded else "not honoured",
    )
    return generator


def _honours_seed(generator: ServedGenerator) -> bool:
    """The probe request with seed 1 three times, then with seed 2: the last two with seed 1 must agree and the one
    with seed 2 differ. The first is not compared: llama-cpp-python's first answer to a prompt it has not just
    evaluated can differ from its repeats (measured: its prompt cache re-evaluates only the last token)."""
    params = Params(temperature=1.0, max_tokens=SEED_PROBE_TOKENS, top_logprobs=0, stop=())
    body = generator._body(0, SEED_PROBE, params)
    _, first, again, other = (generator._request(body, 1, seed, params)[0].text for seed in (1, 1, 1, 2))
    return first == again != other


class ChatOnlyScorer:
    """The scorer slot of backend ``openai-chat``: a chat endpoint gives no prompt log-probabilities, so it cannot
    score sentences; loading it says how to audit it instead."""

    @classmethod
    def load(cls, name: str, spec: ModelSpec, source: object, settings: Settings) -> ChatOnlyScorer:
        raise ModelLoadError(
            f"model {name!r} is a chat endpoint without prompt log-probabilities: audit it with mode generation "
            '(options.mode = "generation")'
        )
