"""The vLLM backend for GPU workers: prompt log-probabilities over token-id prompts, greedy generation.

Written against vLLM's documented offline API (``LLM``, ``SamplingParams``, token-id prompts). NOT EXERCISED on the
CPU machines this project is developed on (vLLM cannot be installed there); tests/workers/lm/test_vllm.py runs only
where vLLM and CUDA are present. See docs/engine.md.

Scoring: each sentence is sent as token ids (document start first) with ``max_tokens=1``, ``prompt_logprobs=0``
(the log-probability of each prompt token only) and ``detokenize=False``; the NLL is minus the sum of the prompt
log-probs of positions 1..n-1. vLLM computes these log-probs from the raw logits in fp32. Prefix caching is turned
off: vLLM ignores its prefix cache for prompt-logprob requests anyway, and with it enabled some releases returned
stale log-probs for cached positions (vllm-project/vllm#42019) -- a silent wrong number.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from typing import Any

from app.settings import ModelSpec, Settings
from workers.lm.base import ModelLoadError, ProgressCallback, SentenceTooLong, check_not_empty, plain_ids
from workers.lm.loading import find_document_start, load_tokenizer, weights_fingerprint
from workers.lm.registry import ModelSource


class VLLMScorer:
    """Scorer over a vLLM engine. See workers.lm.base.Scorer for the contract."""

    def __init__(self, name: str, llm: Any, tokenizer: Any, document_start_id: int, fingerprint: str) -> None:
        self.name = name
        self.llm = llm
        self.tokenizer = tokenizer
        self.document_start_id = document_start_id
        self.document_start = tokenizer.convert_ids_to_tokens(document_start_id)
        self.fingerprint = fingerprint
        self.max_length = int(llm.llm_engine.model_config.max_model_len)

    @classmethod
    def load(cls, name: str, spec: ModelSpec, source: ModelSource, settings: Settings) -> VLLMScorer:
        try:
            from vllm import LLM  # lazy: vllm exists on GPU workers only (and pulls in torch and CUDA)
        except ImportError as exc:
            raise ModelLoadError(
                f"model {name!r}: backend 'vllm' needs the vllm package (pip install 'memaudit[vllm]') and a CUDA GPU"
            ) from exc

        tokenizer = load_tokenizer(name, source)
        document_start_id = find_document_start(tokenizer)
        if document_start_id is None:
            raise ModelLoadError(f"model {name!r}: its tokenizer has no BOS token and no <|endoftext|> separator")
        model, tokenizer_path = source.location, source.location
        if source.gguf_file:
            # vLLM loads a GGUF file by path and wants a Hugging Face tokenizer directory next to it
            model = str(source.directory / source.gguf_file)
            tokenizer_path = tempfile.mkdtemp(prefix="memaudit-tokenizer-")
            tokenizer.save_pretrained(tokenizer_path)
        try:
            llm = LLM(
                model=model,
                tokenizer=tokenizer_path,
                dtype=spec.dtype,
                seed=0,
                enable_prefix_caching=False,
            )
        except Exception as exc:  # vLLM raises many types; the worker must report, not crash
            raise ModelLoadError(f"model {name!r}: vLLM could not load {model} ({exc})") from exc
        digest = hashlib.sha256(f"vllm|{weights_fingerprint(source)}|{spec.dtype}|{document_start_id}".encode())
        return cls(name, llm, tokenizer, document_start_id, digest.hexdigest())

    def _ids(self, texts: Sequence[str], extra: int = 0) -> list[list[int]]:
        seqs = [[self.document_start_id, *ids] for ids in plain_ids(self.tokenizer, texts)]
        for index, seq in enumerate(seqs):
            if len(seq) + extra > self.max_length:
                raise SentenceTooLong(index, len(seq) + extra, self.max_length)
        return seqs

    def score(self, pairs: Sequence[tuple[str, str]], *, on_progress: ProgressCallback | None = None) -> list[float]:
        from vllm import SamplingParams  # lazy: vllm exists on GPU workers only

        check_not_empty(pairs)
        seqs = self._ids([prefix + continuation for prefix, continuation in pairs])
        if not seqs:
            return []
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        outputs = self.llm.generate([{"prompt_token_ids": seq} for seq in seqs], params, use_tqdm=False)
        if on_progress is not None:  # one call: vLLM schedules the whole list itself (seconds on a GPU)
            on_progress(len(seqs))
        return [prompt_nll(seq, out.prompt_logprobs) for seq, out in zip(seqs, outputs, strict=True)]

    def generate(self, prompts: Sequence[str], max_new_tokens: int, stop: str = "\n") -> list[str]:
        from vllm import SamplingParams  # lazy: vllm exists on GPU workers only

        seqs = self._ids(prompts, extra=max_new_tokens)
        if not seqs:
            return []
        params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens, stop=[stop] if stop else None)
        outputs = self.llm.generate([{"prompt_token_ids": seq} for seq in seqs], params, use_tqdm=False)
        texts = [out.outputs[0].text for out in outputs]
        return [text.split(stop, 1)[0] if stop else text for text in texts]


def prompt_nll(seq: Sequence[int], prompt_logprobs: Any) -> float:
    """-sum log p(seq[i] | seq[:i]) for i >= 1. vLLM returns None for position 0 and, at every later position, a
    mapping token id -> Logprob that always holds the prompt's own token."""
    if prompt_logprobs is None or len(prompt_logprobs) != len(seq):
        raise RuntimeError("vLLM returned no prompt log-probs for every position; cannot score")
    return -sum(float(prompt_logprobs[i][seq[i]].logprob) for i in range(1, len(seq)))
