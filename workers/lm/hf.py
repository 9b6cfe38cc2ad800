"""The transformers backend (CPU or CUDA; local directories, cached hub ids and GGUF files)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from app.settings import ModelSpec, Settings
from workers.lm.base import SentenceTooLong, check_not_empty
from workers.lm.loading import LoadedModel, load_model
from workers.lm.registry import ModelSource
from workers.lm.whole import score_whole


class HFScorer:
    """Scorer over a transformers causal LM. See workers.lm.base.Scorer for the contract."""

    def __init__(self, name: str, loaded: LoadedModel, batch_tokens: int) -> None:
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

    @classmethod
    def load(cls, name: str, spec: ModelSpec, source: ModelSource, settings: Settings) -> HFScorer:
        return cls(name, load_model(name, spec, source, settings), settings.score_batch_tokens)

    # -- tokenization -------------------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text without special tokens (the document start is added by the caller)."""
        if not texts:
            return []
        return [list(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

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

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        return self.score_sentences([prefix + continuation for prefix, continuation in pairs])

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
