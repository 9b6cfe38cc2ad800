"""The transformers backend (CPU or CUDA; local directories, cached hub ids and GGUF files)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch

from app.settings import ModelSpec, Settings
from workers.lm.base import PROBE_PAIRS, ProgressCallback, SentenceTooLong, check_not_empty, plain_ids
from workers.lm.engine import Engine, Mode
from workers.lm.loading import LoadedModel, load_model
from workers.lm.registry import ModelSource
from workers.lm.whole import score_whole

log = logging.getLogger(__name__)

CPU_PACK_TOKENS = 256
GPU_PACK_TOKENS = 2048
_SELF_CHECK = list(PROBE_PAIRS)  # probe pairs for the load-time self-check (shared with the served backend)


class HFScorer:
    """Scorer over a transformers causal LM. See workers.lm.base.Scorer for the contract."""

    def __init__(self, name: str, loaded: LoadedModel, batch_tokens: int, mode: Mode | None = "packed") -> None:
        self.name = name
        self.loaded = loaded
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.device = loaded.device
        self.fingerprint = loaded.fingerprint
        self.document_start = loaded.document_start
        self.document_start_id = loaded.document_start_id
        self.max_length = loaded.max_length
        self.batch_tokens = batch_tokens
        # packs of 256 tokens keep attention cheap on a CPU; on a GPU 2,048 scored 2.0-2.6x faster (fp32, H100,
        # benchmarks/gpu_hf.py, docs/engine.md "On a GPU"): the pass count, not the arithmetic, bounds it there
        pack = GPU_PACK_TOKENS if self.device.type == "cuda" else CPU_PACK_TOKENS
        self.engine = Engine(self.model, self.device, batch_tokens, mode, pack) if mode else None

    @classmethod
    def load(cls, name: str, spec: ModelSpec, source: ModelSource, settings: Settings) -> HFScorer:
        scorer = cls(name, load_model(name, spec, source, settings), settings.score_batch_tokens)
        scorer.self_check()
        return scorer

    def self_check(self) -> float:
        """Compare the engine with whole-sentence scoring on a few probe sentences. An architecture the engine does
        not handle (a recurrent or otherwise non-standard cache) falls back to whole-sentence scoring: slower,
        never wrong. Returns the largest difference seen (nats)."""
        if self.engine is None:
            return 0.0
        tolerance = 1e-3 if self.loaded.dtype == torch.float32 else 0.25
        try:
            fast = self.score(_SELF_CHECK)
            slow = self.score_sentences([p + c for p, c in _SELF_CHECK])
            worst = max(abs(a - b) for a, b in zip(fast, slow, strict=True))
        except Exception as exc:  # any failure of the fast path means "use the reference path"
            log.warning(
                "model %s: prefix-sharing engine failed its self-check (%s); scoring whole sentences",
                self.name,
                type(exc).__name__,
            )
            self.engine = None
            return float("inf")
        if not worst <= tolerance:
            log.warning(
                "model %s: engine differs from whole-sentence scoring by %.2e nats; scoring whole sentences",
                self.name,
                worst,
            )
            self.engine = None
        return worst

    # -- tokenization -------------------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text without special tokens (the document start is added by the caller)."""
        return plain_ids(self.tokenizer, texts)

    def sentence_ids(self, sentences: Sequence[str]) -> list[list[int]]:
        """Document start + tokens of each sentence; raises SentenceTooLong (by index) before any compute."""
        seqs = [[self.document_start_id, *ids] for ids in self.encode(sentences)]
        for index, seq in enumerate(seqs):
            if len(seq) > self.max_length:
                raise SentenceTooLong(index, len(seq), self.max_length)
        return seqs

    # -- scoring ------------------------------------------------------------------------------------------------
    def score_sentences(self, sentences: Sequence[str]) -> list[float]:
        """Reference: each whole sentence scored from the document start (no prefix sharing)."""
        check_not_empty([(s, "") for s in sentences])
        return score_whole(self.model, self.sentence_ids(sentences), self.batch_tokens, self.device)

    def score(self, pairs: Sequence[tuple[str, str]], *, on_progress: ProgressCallback | None = None) -> list[float]:
        check_not_empty(pairs)
        if not pairs:
            return []
        sentences = self.sentence_ids([prefix + continuation for prefix, continuation in pairs])
        if self.engine is None:
            return score_whole(self.model, sentences, self.batch_tokens, self.device, on_progress)
        distinct = sorted({prefix for prefix, _ in pairs})
        encoded = dict(zip(distinct, self.encode(distinct), strict=True))
        prefixes = [[self.document_start_id, *encoded[prefix]] for prefix, _ in pairs]
        return self.engine.score(sentences, prefixes, on_progress=on_progress)

    # -- generation ---------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, prompts: Sequence[str], max_new_tokens: int, stop: str = "\n") -> list[str]:
        """Greedy decoding in length-sorted, left-padded batches; text cut before the first ``stop``."""
        if not prompts:
            return []
        seqs = self.sentence_ids(prompts)
        for index, seq in enumerate(seqs):
            if len(seq) + max_new_tokens > self.max_length:
                raise SentenceTooLong(index, len(seq) + max_new_tokens, self.max_length)
        result = [""] * len(seqs)
        budget = max(1, self.batch_tokens // max(1, max(len(s) for s in seqs) + max_new_tokens))
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        for start in range(0, len(order), budget):
            group = order[start : start + budget]
            texts = self._generate_batch([seqs[i] for i in group], max_new_tokens, stop)
            for index, text in zip(group, texts, strict=True):
                result[index] = text
        return result

    def _generate_batch(self, seqs: list[list[int]], max_new_tokens: int, stop: str) -> list[str]:
        width = max(len(s) for s in seqs)
        pad = self._pad_id()
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, seq in enumerate(seqs):
            ids[row, width - len(seq) :] = torch.as_tensor(seq)
            mask[row, width - len(seq) :] = 1
        kwargs: dict[str, Any] = {}
        if stop:
            kwargs = {"stop_strings": [stop], "tokenizer": self.tokenizer}
        out = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=pad,
            **kwargs,
        )
        texts = self.tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)
        return [text.split(stop, 1)[0] if stop else text for text in texts]

    def _pad_id(self) -> int:
        for candidate in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id, self.document_start_id):
            if candidate is not None:
                return int(candidate)
        return 0
