"""Direct NLL scoring for the ground-truth model (used to confirm its memberships before shipping).

Independent of the service's scoring engine on purpose: it checks the shipped model, and the engine is in turn
checked against the model's known memberships. The WikiMem formula itself (calibrated score, ranks, similar
names, generic subject) is the service's, from core.measures.wikimem. NLL = summed negative log-likelihood
of all tokens of the sentence with ``<|endoftext|>`` prepended (not itself scored).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from core.measures.wikimem import ranks
from workers.lm.base import plain_ids
from workers.lm.engine import returned_cache, with_cache


def best_truth_rank(scores: Sequence[float], is_truth: Sequence[bool]) -> int:
    """Rank (1 = best; ties broken against the truths, as the service ranks) of the best-scoring ground truth."""
    return min(r for r, t in zip(ranks(scores, is_truth), is_truth, strict=True) if t)


class SentenceScorer:
    """Exact full-sentence NLLs; sentences of one call that share a token prefix run it once (KV cache)."""

    def __init__(self, model_dir: str | Path, chunk: int = 256) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.bos = self.tokenizer.bos_token_id
        self.chunk = chunk

    def encode(self, sentences: Sequence[str]) -> list[list[int]]:
        return [[self.bos, *x] for x in plain_ids(self.tokenizer, sentences)]

    @torch.inference_mode()
    def nll(self, sentences: Sequence[str]) -> list[float]:
        seqs = self.encode(sentences)
        out: list[float] = []
        for start in range(0, len(seqs), self.chunk):
            out.extend(self._shared_prefix_nll(seqs[start : start + self.chunk]))
        return out

    def _shared_prefix_nll(self, seqs: list[list[int]]) -> list[float]:
        n_prefix = _common_prefix_len(seqs)
        prefix = torch.tensor([seqs[0][:n_prefix]])
        first = self.model(input_ids=prefix, use_cache=True)
        logp_prefix = torch.log_softmax(first.logits[0].float(), -1)  # (n_prefix, V)
        targets = torch.tensor(seqs[0][1:n_prefix])
        prefix_nll = -float(logp_prefix[:-1].gather(1, targets[:, None]).sum()) if n_prefix > 1 else 0.0
        rests = [s[n_prefix:] for s in seqs]
        width = max(len(r) for r in rests)
        ids = torch.zeros((len(rests), width), dtype=torch.long)
        mask = torch.zeros((len(rests), width), dtype=torch.long)
        for row, rest in enumerate(rests):
            ids[row, : len(rest)] = torch.tensor(rest)
            mask[row, : len(rest)] = 1
        cache = returned_cache(first)
        cache.batch_repeat_interleave(len(rests))
        attention = torch.cat([torch.ones((len(rests), n_prefix), dtype=torch.long), mask], dim=1)
        positions = (n_prefix + torch.arange(width)).expand(len(rests), -1)
        logits = self.model(
            input_ids=ids, attention_mask=attention, position_ids=positions, **with_cache(self.model, cache)
        ).logits.float()
        # token j of a rest is predicted by rest position j-1, its first token by the prefix's last position
        logp = torch.log_softmax(
            torch.cat([first.logits[:, -1:].float().expand(len(rests), 1, -1), logits[:, :-1]], dim=1), -1
        )
        token_nll = -logp.gather(2, ids[:, :, None])[:, :, 0] * mask
        return [prefix_nll + float(x) for x in token_nll.sum(1)]


def _common_prefix_len(seqs: list[list[int]]) -> int:
    """Longest shared token prefix, leaving every sequence at least one token to score after it."""
    limit = min(len(s) for s in seqs) - 1
    n = 1
    while n < limit and all(s[n] == seqs[0][n] for s in seqs):
        n += 1
    return max(1, n)
