"""The measures of one trained capacity cell (Morris et al. 2025), shared by the capacity job and
``benchmarks/capacity_table.py`` so that the service and the paper-replication table compute them one way.

    measure_cell(model, tokens, held_out, prefix_len, mia_seed) -> dict of plain floats
"""

from __future__ import annotations

import torch

from core.measures import capacity as cap
from workers.training.loop import greedy_extracted, sequence_nll
from workers.training.model import TinyGPT


def measure_cell(model: TinyGPT, tokens: torch.Tensor, held_out: torch.Tensor, prefix_len: int, mia_seed: int) -> dict:
    """Memorized bits (paper eq. 2, uniform data: H(X) − H(X | θ) with the model's NLL as H(X | θ)), bits per
    parameter, train and held-out bits per token, the loss-threshold MIA (F1, AUC) on balanced member and
    non-member sets drawn with ``mia_seed`` — so a model that memorizes nothing scores ≈ 0.5 at every N — and
    the share of training sequences greedy decoding reproduces from their first ``prefix_len`` tokens."""
    cfg = model.cfg
    train_bits = cap.nats_to_bits(sequence_nll(model, tokens).cpu().numpy())
    held_bits = cap.nats_to_bits(sequence_nll(model, held_out).cpu().numpy())
    memorized = cap.memorized_bits(train_bits, cfg.seq_len, cfg.vocab_size)
    members, nonmembers = cap.balanced_sets(train_bits, held_bits, seed=mia_seed)
    return {
        "memorized_bits": memorized,
        "bits_per_param": cap.bits_per_parameter(memorized, cfg.param_count()),
        "train_bits_per_token": float(train_bits.mean()) / cfg.seq_len,
        "heldout_bits_per_token": float(held_bits.mean()) / cfg.seq_len,
        "mia_f1": cap.mia_f1(members, nonmembers),
        "mia_auc": cap.mia_auc(members, nonmembers),
        "extraction_rate": float(greedy_extracted(model, tokens, prefix_len).float().mean()),
    }
