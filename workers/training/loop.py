"""Training loop for capacity runs: Adam on a fixed token dataset, full batch by default, callbacks per step.

The loop is lean on purpose: the dataset is one preallocated (N, S) tensor, the head is the fused chunked
cross-entropy (``fused_head``), and every step also yields each training sequence's NLL at the parameters
*before* the update — the head computes it anyway — so memorized bits can be tracked at no extra cost.

Public API::

    trainer = Trainer(model, tokens, TrainConfig(steps=2000, lr=1e-2))
    trainer.run(callback=lambda info: info.step % 100 == 0 and print(info.loss_bits_per_token))
    nll = sequence_nll(model, tokens)          # (N,) nats per sequence
    trainer.state_dict() / trainer.load_state_dict(...)   # checkpoint and resume
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import torch

from workers.training.fused_head import linear_cross_entropy, nll_per_position
from workers.training.model import TinyGPT

Precision = Literal["fp32", "bf16"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings. ``batch_size=None`` is full-batch (every step sees all N sequences).

    ``precision="bf16"`` trains a model whose parameters are bf16 numbers: Adam updates fp32 master copies
    and the model holds them rounded to bf16 (the classic master-weights scheme), so the trained model is
    exactly representable in bf16 and its capacity is that of bf16 weights. Activations stay fp32: bf16
    kernels on AVX2 CPUs without native bf16 are 5-70x slower than fp32 for these shapes (measured here),
    and a GPU worker running true bf16 matmuls would also round activations (documented difference).
    """

    steps: int = 2000
    lr: float = 1e-2
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    weight_decay: float = 0.0
    warmup_steps: int = 50
    schedule: Literal["constant", "cosine"] = "constant"
    min_lr_ratio: float = 0.1
    batch_size: int | None = None
    precision: Precision = "fp32"
    chunk_positions: int | None = None  # fused-head rows per chunk; None: fused_head.auto_chunk(V)
    head_shards: int = 1  # threads for the fused head (set to the core count; see fused_head._sharded)
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lr_at(self, step: int) -> float:
        """Linear warm-up, then constant or cosine decay to ``min_lr_ratio · lr`` at ``steps``."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if self.schedule == "constant":
            return self.lr
        span = max(1, self.steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


@dataclass
class StepInfo:
    """What a callback sees after each optimizer step.

    ``seq_nll`` holds the batch's per-sequence NLL in nats at the parameters the step started from (for a
    full-batch run: every training sequence, aligned with ``batch_index``).
    """

    step: int
    seconds: float
    loss_bits_per_token: float
    lr: float
    seq_nll: torch.Tensor
    batch_index: torch.Tensor | None = None


Callback = Callable[[StepInfo], bool | None]  # return True to stop (cancellation, time budget)


@dataclass
class Trainer:
    model: TinyGPT
    tokens: torch.Tensor
    config: TrainConfig
    step: int = 0
    seconds: float = 0.0
    _optimizer: torch.optim.Optimizer = field(init=False)
    _gen: torch.Generator = field(init=False)
    _masters: list[torch.Tensor] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.tokens.dim() != 2 or self.tokens.shape[1] != self.model.cfg.seq_len:
            raise ValueError(f"tokens must be (N, {self.model.cfg.seq_len}), got {tuple(self.tokens.shape)}")
        self.tokens = self.tokens.contiguous()
        params = list(self.model.parameters())
        if self.config.precision == "bf16":
            self._masters = [p.detach().clone().requires_grad_(True) for p in params]
            params = self._masters
            self._round_into_model()
        self._optimizer = torch.optim.Adam(
            params,
            lr=self.config.lr,
            betas=self.config.betas,
            eps=self.config.eps,
            weight_decay=self.config.weight_decay,
            fused=True,
        )
        self._gen = torch.Generator().manual_seed(self.config.seed)

    @torch.no_grad()
    def _round_into_model(self) -> None:
        assert self._masters is not None
        for p, master in zip(self.model.parameters(), self._masters, strict=True):
            p.copy_(master.to(torch.bfloat16))

    def run(self, callback: Callback | None = None, until_step: int | None = None) -> int:
        """Train until ``until_step`` (default ``config.steps``) or until the callback returns True."""
        self.model.train()
        # config.steps is read every step: a caller may re-plan the schedule's length mid-run
        while self.step < (self.config.steps if until_step is None else until_step):
            info = self._one_step()
            if callback is not None and callback(info):
                break
        return self.step

    def _batch(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        n, bs = self.tokens.shape[0], self.config.batch_size
        if bs is None or bs >= n:
            return self.tokens, None
        index = torch.randint(0, n, (bs,), generator=self._gen).to(self.tokens.device)
        return self.tokens[index], index

    def _one_step(self) -> StepInfo:
        start = time.perf_counter()
        batch, index = self._batch()
        lr = self.config.lr_at(self.step)
        for group in self._optimizer.param_groups:
            group["lr"] = lr
        self.model.zero_grad(set_to_none=True)
        n_pos = batch.numel()
        nll = torch.empty(n_pos, dtype=torch.float32, device=batch.device)
        loss = _summed_nll(self.model, batch, nll, self.config)
        (loss / n_pos).backward()
        if self._masters is not None:
            for p, master in zip(self.model.parameters(), self._masters, strict=True):
                master.grad = p.grad
        self._optimizer.step()
        if self._masters is not None:
            self._round_into_model()
        self.step += 1
        self.seconds += time.perf_counter() - start
        bits = loss.item() / n_pos / math.log(2.0)
        return StepInfo(self.step, self.seconds, bits, lr, nll.view(batch.shape).sum(1), index)

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self._optimizer.state_dict(),
            "step": self.step,
            "seconds": self.seconds,
            "generator": self._gen.get_state(),
            "masters": None if self._masters is None else [m.detach().clone() for m in self._masters],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        if self._masters is not None:
            with torch.no_grad():
                for master, saved in zip(self._masters, state["masters"], strict=True):
                    master.copy_(saved)
        self._optimizer.load_state_dict(state["optimizer"])
        self.step = int(state["step"])
        self.seconds = float(state["seconds"])
        self._gen.set_state(state["generator"].cpu())


def _summed_nll(model: TinyGPT, batch: torch.Tensor, nll_out: torch.Tensor, cfg: TrainConfig) -> torch.Tensor:
    h = model.hidden(batch).reshape(-1, model.cfg.d_model)
    return linear_cross_entropy(h, model.head_weight, batch.reshape(-1), nll_out, cfg.chunk_positions, cfg.head_shards)


@torch.no_grad()
def sequence_nll(model: TinyGPT, tokens: torch.Tensor, batch_sequences: int = 256) -> torch.Tensor:
    """(N,) summed NLL in nats of each sequence (all S tokens, the first predicted from BOS)."""
    model.eval()
    out = torch.empty(tokens.shape[0], dtype=torch.float64, device=tokens.device)
    for s in range(0, tokens.shape[0], batch_sequences):
        batch = tokens[s : s + batch_sequences]
        h = model.hidden(batch)
        nll = nll_per_position(h.reshape(-1, h.shape[-1]), model.head_weight, batch.reshape(-1))
        out[s : s + batch_sequences] = nll.view(batch.shape).double().sum(1)
    model.train()
    return out


@torch.no_grad()
def greedy_extracted(model: TinyGPT, tokens: torch.Tensor, prefix_len: int) -> torch.Tensor:
    """(N,) bool: does greedy decoding from each sequence's first ``prefix_len`` tokens reproduce the rest?

    Greedy generation matches the suffix exactly iff the argmax under teacher forcing is the true token at
    every suffix position (by induction, the generated context then equals the true one), so one forward
    pass decides it.
    """
    if not 0 <= prefix_len < tokens.shape[1]:
        raise ValueError(f"prefix_len must be in [0, {tokens.shape[1]}), got {prefix_len}")
    model.eval()
    ok = torch.empty(tokens.shape[0], dtype=torch.bool, device=tokens.device)
    for s in range(0, tokens.shape[0], 256):
        batch = tokens[s : s + 256]
        pred = model.logits(batch).argmax(-1)
        ok[s : s + 256] = (pred[:, prefix_len:] == batch[:, prefix_len:]).all(1)
    model.train()
    return ok


def uniform_tokens(n: int, seq_len: int, vocab_size: int, seed: int, heldout: int = 0) -> torch.Tensor:
    """(n, seq_len) int64 tokens drawn uniformly from [0, V), a pure function of the seed (never stored).

    With ``heldout`` > 0, returns (n + heldout, seq_len): the same n rows first, then ``heldout`` fresh
    samples from the same distribution drawn later in the same stream (non-members for the MIA). Only the
    low 32 bits of the seed matter (torch's CPU generator), so seeds are reduced modulo 2**32 here.
    """
    gen = torch.Generator().manual_seed(seed % 2**32)
    members = torch.randint(0, vocab_size, (n, seq_len), generator=gen, dtype=torch.int64)
    if heldout <= 0:
        return members
    extra = torch.randint(0, vocab_size, (heldout, seq_len), generator=gen, dtype=torch.int64)
    return torch.cat([members, extra])
