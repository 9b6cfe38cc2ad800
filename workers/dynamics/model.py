"""A tiny GPT whose weights carry a leading ensemble axis: K independent models trained in one set of tensor ops.

The K-fold runner trains K models that differ only in their training folds. For models this small, CPU time goes
to per-op overhead rather than arithmetic, so stacking the K models into batched matmuls (``torch.bmm``) makes a
K-fold run cost roughly one run's worth of Python and kernel launches. The models never share a parameter: each
slice [k] of every tensor receives gradients only from model k's loss, so they are exactly K separate GPTs.

Shapes: tokens [K, B, T] -> logits [K, B, T, V]. Pre-LayerNorm blocks, learned positions, tied input/output embedding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class EnsembleConfig:
    vocab_size: int
    context: int  # maximum tokens per sequence, BOS/EOS included
    d_model: int = 64
    n_layer: int = 2
    n_head: int = 4

    def validate(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_head={self.n_head}")


def _param(k: int, *shape: int, std: float | None) -> nn.Parameter:
    if std is None:
        return nn.Parameter(torch.zeros(k, *shape))
    return nn.Parameter(torch.randn(k, *shape) * std)


class EnsembleLinear(nn.Module):
    def __init__(self, k: int, d_in: int, d_out: int, std: float) -> None:
        super().__init__()
        self.weight = _param(k, d_in, d_out, std=std)
        self.bias = _param(k, 1, d_out, std=None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [K, N, d_in]
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleLayerNorm(nn.Module):
    def __init__(self, k: int, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(k, 1, d))
        self.bias = nn.Parameter(torch.zeros(k, 1, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [K, N, d]
        return F.layer_norm(x, x.shape[-1:]) * self.weight + self.bias


class EnsembleBlock(nn.Module):
    def __init__(self, k: int, cfg: EnsembleConfig) -> None:
        super().__init__()
        d, std = cfg.d_model, 0.02
        self.n_head = cfg.n_head
        self.ln1, self.ln2 = EnsembleLayerNorm(k, d), EnsembleLayerNorm(k, d)
        self.qkv = EnsembleLinear(k, d, 3 * d, std)
        # GPT-2's scaled init of residual projections keeps early training stable
        self.proj = EnsembleLinear(k, d, d, std / math.sqrt(2 * cfg.n_layer))
        self.fc = EnsembleLinear(k, d, 4 * d, std)
        self.out = EnsembleLinear(k, 4 * d, d, std / math.sqrt(2 * cfg.n_layer))

    def forward(self, x: torch.Tensor, batch: int, length: int) -> torch.Tensor:  # x [K, B*T, d]
        k, _, d = x.shape
        q, kk, v = self.qkv(self.ln1(x)).split(d, dim=-1)

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(k * batch, length, self.n_head, d // self.n_head).transpose(1, 2)

        # right padding + causal masking: a real token never attends to a pad, so no key mask is needed
        att = F.scaled_dot_product_attention(heads(q), heads(kk), heads(v), is_causal=True)
        att = att.transpose(1, 2).reshape(k, batch * length, d)
        x = x + self.proj(att)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class EnsembleGPT(nn.Module):
    def __init__(self, k: int, cfg: EnsembleConfig) -> None:
        super().__init__()
        cfg.validate()
        self.k, self.cfg = k, cfg
        self.tok = _param(k, cfg.vocab_size, cfg.d_model, std=0.02)
        self.pos = _param(k, cfg.context, cfg.d_model, std=0.01)
        self.blocks = nn.ModuleList(EnsembleBlock(k, cfg) for _ in range(cfg.n_layer))
        self.ln_f = EnsembleLayerNorm(k, cfg.d_model)
        with torch.no_grad():
            # every run starts from the same weights: the K runs then differ only in the fold they hold out, so a
            # string's held-out minus train loss reflects training on it rather than a different random init
            for p in self.parameters():
                p.copy_(p[:1].expand_as(p))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [K, B, T] (long) -> logits [K, B, T, V]."""
        k, b, t = tokens.shape
        if t > self.cfg.context:
            raise ValueError(f"sequence of {t} tokens exceeds the context of {self.cfg.context}")
        rows = torch.arange(k).view(k, 1, 1)
        x = self.tok[rows, tokens] + self.pos[:, None, :t, :]
        x = x.reshape(k, b * t, -1)
        for block in self.blocks:
            x = block(x, b, t)
        logits = torch.bmm(self.ln_f(x), self.tok.transpose(1, 2))
        return logits.view(k, b, t, -1)


def token_nll(model: EnsembleGPT, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence summed NLL (nats) of every next-token prediction where ``mask`` [K, B, T-1] is 1.

    tokens [K, B, T]; the prediction of tokens[..., 1:] from tokens[..., :-1]. Returns [K, B]."""
    logits = model(tokens[..., :-1])
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, tokens[..., 1:].unsqueeze(-1)).squeeze(-1)
    return (nll * mask).sum(-1)
