"""Whole-sentence scoring: every sentence run from its document-start token, right-padded batches.

This is the reference the fast engine is checked against (tests) and its fallback for sentences whose prefix tokens
are not a prefix of the sentence's tokens. It already computes LM-head logits only at scored positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from workers.lm.base import ProgressCallback
from workers.lm.engine import forward_at
from workers.lm.plan import batch_rows


def right_pad(seqs: Sequence[Sequence[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids (B, L) padded with token 0 (masked out, never scored) and the attention mask (B, L)."""
    width = max(len(s) for s in seqs)
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return ids.to(device), mask.to(device)


def nll_of_rows(logits: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor, n_rows: int) -> torch.Tensor:
    """Sum of -log p(target) per row. logits (N, V) at scored positions, targets (N,), rows (N,) row index.
    The log-softmax runs in fp32 whatever the model's precision: half-precision normalisers lose ~1e-2 nats."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(1, targets[:, None]).squeeze(1)
    return torch.zeros(n_rows, dtype=torch.float64, device=logits.device).index_add_(0, rows, -picked.double())


@torch.inference_mode()
def score_batch(model: Any, seqs: Sequence[Sequence[int]], device: torch.device) -> list[float]:
    """NLL of tokens 1..n-1 of each sequence (token 0 is the document start, the condition)."""
    ids, mask = right_pad(seqs, device)
    # position t predicts token t+1: keep positions that have a real next token
    keep = torch.zeros_like(mask, dtype=torch.bool)
    keep[:, :-1] = mask[:, 1:] == 1
    targets = ids[:, 1:][keep[:, :-1]]
    rows = torch.arange(len(seqs), device=device)[:, None].expand_as(keep)[keep]
    logits, _ = forward_at(model, keep, input_ids=ids, attention_mask=mask, use_cache=False)
    return nll_of_rows(logits, targets, rows, len(seqs)).tolist()


def score_whole(
    model: Any,
    seqs: Sequence[Sequence[int]],
    batch_tokens: int,
    device: torch.device,
    on_progress: ProgressCallback | None = None,
) -> list[float]:
    """Score token sequences (each starting with the document-start id) in memory-bounded, length-sorted batches;
    ``on_progress`` gets the number of sequences finished after each batch."""
    result = [0.0] * len(seqs)
    done = 0
    for group in batch_rows([len(s) for s in seqs], batch_tokens, longest_first=True):
        for index, value in zip(group, score_batch(model, [seqs[i] for i in group], device), strict=True):
            result[index] = value
        done += len(group)
        if on_progress is not None:
            on_progress(done)
    return result
