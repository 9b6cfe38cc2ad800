"""The K-fold x E-epoch training runner behind the `dynamics` audit (recipe: a tiny GPT-style model from scratch).

The unique strings are split into K folds (every copy of a string in the same fold, so a held-out run never sees
it). Run k trains on the strings outside fold k, each repeated as often as its count says, for E epochs; after every
epoch all K runs score every unique string. A string's held-out loss at epoch e is its loss in the run that holds
its fold out; its train loss is the mean over the K-1 runs that train on it (the paper's expectation over models
trained with the string, estimated from the K-1 runs at hand). The K runs are trained together as one
``EnsembleGPT`` (see model.py): the same numbers as K separate loops, at a fraction of the CPU overhead.

Per-token loss = summed NLL of every token after BOS (EOS included) / number of those tokens, in nats.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.measures.dynamics import Trajectories
from workers.dynamics.model import EnsembleConfig, EnsembleGPT, token_nll


@dataclass(frozen=True)
class KFoldConfig:
    folds: int = 4
    epochs: int = 10
    d_model: int = 64
    n_layer: int = 2
    n_head: int = 4
    batch_size: int = 16
    lr: float = 3e-3
    weight_decay: float = 0.0
    context: int = 64  # tokens per sequence, BOS and EOS included
    seed: int = 0

    @property
    def passes(self) -> int:
        """Cost in passes over (K-1)/K of the data: K runs x E epochs."""
        return self.folds * self.epochs


@dataclass
class RunResult:
    trajectories: Trajectories
    folds: list[int]  # fold of every unique string
    run_loss: np.ndarray  # [K, strings, epochs]: per-token loss of every string in every run


def check_inputs(sequences: Sequence[Sequence[int]], counts: Sequence[int], cfg: KFoldConfig) -> None:
    """The bad inputs of the issue, as ValueErrors naming the problem (the API maps them to 422s)."""
    if cfg.folds < 2:
        raise ValueError(f"folds must be at least 2 (got {cfg.folds}): one run must hold each string out")
    if cfg.epochs < 1:
        raise ValueError(f"epochs must be at least 1 (got {cfg.epochs})")
    if len(sequences) < cfg.folds:
        raise ValueError(f"{len(sequences)} distinct strings cannot fill {cfg.folds} folds")
    if len(counts) != len(sequences) or any(c < 1 for c in counts):
        raise ValueError("every string needs a count of at least 1")
    longest = max(len(s) for s in sequences)
    if longest + 2 > cfg.context:
        raise ValueError(f"a string of {longest} tokens (+BOS/EOS) exceeds the context of {cfg.context} tokens")
    if min(len(s) for s in sequences) < 1:
        raise ValueError("empty strings cannot be scored")


def assign_folds(counts: Sequence[int], k: int, seed: int) -> np.ndarray:
    """Stratified by frequency: strings sorted by count are dealt round-robin (random order within a round), so
    every fold holds frequent and rare strings and the K training sets have similar sizes."""
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(len(counts)), -np.asarray(counts)))
    folds = np.empty(len(counts), dtype=int)
    for start in range(0, len(order), k):
        chunk = order[start : start + k]
        folds[chunk] = rng.permutation(k)[: len(chunk)]
    return folds


def _pack(seqs: list[Sequence[int]], bos: int, eos: int) -> tuple[torch.Tensor, torch.Tensor]:
    """BOS + tokens + EOS, right-padded with EOS; mask [N, T-1] marks the scored next-token positions."""
    width = max(len(s) for s in seqs) + 2
    tokens = torch.full((len(seqs), width), eos, dtype=torch.long)
    mask = torch.zeros(len(seqs), width - 1)
    for i, s in enumerate(seqs):
        tokens[i, 1 : len(s) + 1] = torch.as_tensor(list(s), dtype=torch.long)
        tokens[i, 0] = bos
        mask[i, : len(s) + 1] = 1.0
    return tokens, mask


def _epoch_batches(pools: list[np.ndarray], batch_size: int, rng: np.random.Generator) -> list[list[np.ndarray]]:
    """Every run sees each of its training rows once per epoch, in the same number of steps for all runs (so no
    run takes an empty step, which Adam's momentum would turn into an update)."""
    steps = max(1, math.ceil(max(len(p) for p in pools) / batch_size))
    steps = min(steps, min(len(p) for p in pools))
    per_run = [np.array_split(rng.permutation(p), steps) for p in pools]
    return [[per_run[k][s] for k in range(len(pools))] for s in range(steps)]


def _train_step(model: EnsembleGPT, opt: torch.optim.Optimizer, packed, rows: list[np.ndarray]) -> None:
    tokens_all, mask_all = packed
    width = max(int(mask_all[r].sum(1).max()) for r in rows) + 1
    b = max(len(r) for r in rows)
    k = len(rows)
    tokens = torch.full((k, b, width), 0, dtype=torch.long)
    mask = torch.zeros(k, b, width - 1)
    for i, r in enumerate(rows):
        idx = torch.as_tensor(r, dtype=torch.long)
        tokens[i, : len(r)] = tokens_all[idx, :width]
        mask[i, : len(r)] = mask_all[idx, : width - 1]
    nll = token_nll(model, tokens, mask)  # [K, B]
    # per-run mean over that run's scored tokens; the sum over runs keeps the K gradients separate
    loss = (nll.sum(1) / mask.sum((1, 2)).clamp_min(1.0)).sum()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


@torch.no_grad()
def _score_all(model: EnsembleGPT, tokens: torch.Tensor, mask: torch.Tensor, chunk: int = 256) -> np.ndarray:
    """Per-token loss of every unique string under every run: [K, strings]."""
    out = []
    for start in range(0, tokens.shape[0], chunk):
        t, m = tokens[start : start + chunk], mask[start : start + chunk]
        kt = t.unsqueeze(0).expand(model.k, -1, -1)
        km = m.unsqueeze(0).expand(model.k, -1, -1)
        out.append((token_nll(model, kt, km) / km.sum(-1)).numpy())
    return np.concatenate(out, axis=1)


def split_losses(run_loss: np.ndarray, folds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """run_loss [K, S, E] -> (L_tr, L_ho), each [S, E]: mean over the runs that train on s, and s's held-out run."""
    k = run_loss.shape[0]
    held = np.eye(k, dtype=bool)[folds]  # [S, K]: True for the run that holds s out
    per_string = np.transpose(run_loss, (1, 0, 2))  # [S, K, E]
    heldout = per_string[held]  # [S, E]
    train = per_string[~held].reshape(len(folds), k - 1, -1).mean(axis=1)
    return train, heldout


def run_kfold(
    sequences: Sequence[Sequence[int]],
    counts: Sequence[int],
    vocab_size: int,
    cfg: KFoldConfig,
    string_ids: Sequence[str] | None = None,
    frequency: Sequence[float] | None = None,
    on_epoch: Callable[[int], None] | None = None,
) -> RunResult:
    """Train K runs for E epochs and record every string's loss in every run after every epoch.

    ``sequences`` are token ids in [0, vocab_size); ``counts`` how often each appears in the training set.
    ``on_epoch(epoch)`` is called after each epoch (progress; raise from it to cancel)."""
    check_inputs(sequences, counts, cfg)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    bos, eos = vocab_size, vocab_size + 1
    model = EnsembleGPT(cfg.folds, EnsembleConfig(vocab_size + 2, cfg.context, cfg.d_model, cfg.n_layer, cfg.n_head))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    folds = assign_folds(counts, cfg.folds, cfg.seed)
    rows = np.repeat(np.arange(len(sequences)), np.asarray(counts))  # the training multiset
    pools = [rows[folds[rows] != k] for k in range(cfg.folds)]
    packed = _pack(list(sequences), bos, eos)
    losses = []
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        for step_rows in _epoch_batches(pools, cfg.batch_size, rng):
            _train_step(model, opt, packed, step_rows)
        model.eval()
        losses.append(_score_all(model, *packed))
        if on_epoch is not None:
            on_epoch(epoch)
    run_loss = np.stack(losses, axis=-1)  # [K, S, E]
    train, heldout = split_losses(run_loss, folds)
    ids = list(string_ids) if string_ids is not None else [str(i) for i in range(len(sequences))]
    traj = Trajectories(
        string_ids=ids,
        epochs=list(range(1, cfg.epochs + 1)),
        train_loss=train,
        heldout_loss=heldout,
        frequency=list(frequency) if frequency is not None else [float(c) for c in counts],
    )
    return RunResult(trajectories=traj, folds=[int(f) for f in folds], run_loss=run_loss)


def encode_texts(texts: Sequence[str]) -> tuple[list[list[int]], int]:
    """Byte-level tokens for user-supplied strings (vocabulary 256), so any text trains without a tokenizer."""
    return [list(t.encode("utf-8")) for t in texts], 256
