"""A lean GPT-2-style causal LM for training from scratch on token sequences.

Shapes: ``tokens`` is (B, S) int64 with ids in [0, V); the model prepends its own BOS id V, so the
embedding table has V + 1 rows and every one of the S tokens is predicted (from BOS, x1, ..., x_{S-1}).
The output distribution covers the V real tokens only (the tied head uses rows [0, V) of the embedding),
so a sequence's code length is exactly sum_t -log p(x_t | x_<t) over S tokens.

With ``n_positions = S + 1`` (the GPT-2 convention of a context holding the BOS-prefixed sequence) the
paper's smallest model (1 layer, width 32, V = 2048, S = 64) has 80,416 parameters, the count Morris et al.
(2025) report. The last position row is never reached in training (32 parameters, 0.04 %).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from core.measures.capacity import gpt2_param_count


@dataclass(frozen=True)
class GPTConfig:
    """Architecture of one capacity cell (GPT-2 style: pre-LN, GELU MLP of 4x width, tied head).

    ``n_head`` does not change the parameter count; fewer heads are faster on CPU (one 64x64 attention per
    head and sequence).
    """

    n_layer: int = 1
    d_model: int = 32
    n_head: int = 4
    vocab_size: int = 2048
    seq_len: int = 64
    n_positions: int | None = None  # None: seq_len + 1 (BOS-prefixed context)

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_head={self.n_head}")
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {self.vocab_size}")
        if self.context < self.seq_len:
            raise ValueError(f"seq_len={self.seq_len} is longer than the context n_positions={self.context}")

    @property
    def context(self) -> int:
        return self.n_positions if self.n_positions is not None else self.seq_len + 1

    @property
    def bos_id(self) -> int:
        return self.vocab_size

    def param_count(self) -> int:
        """Trainable parameters, counted as the paper does (tied head counted once)."""
        return gpt2_param_count(self.n_layer, self.d_model, self.vocab_size, self.context)

    def to_dict(self) -> dict[str, int | None]:
        return asdict(self)


def paper_smallest() -> GPTConfig:
    """Morris et al. (2025) smallest model: 1 layer, width 32, V = 2048, S = 64 (80,416 parameters)."""
    return GPTConfig(n_layer=1, d_model=32, n_head=4, vocab_size=2048, seq_len=64)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.n_head = cfg.n_head
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        heads = (B, T, self.n_head, d // self.n_head)
        q, k, v = (t.view(heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).reshape(B, T, d))
        # exact (erf) GELU: 3x faster than the tanh form on CPU, and the models are trained from scratch anyway
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class TinyGPT(nn.Module):
    """GPT-2-style LM. ``hidden(tokens)`` -> (B, S, d) final-LN states that predict tokens[:, t]."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size + 1, cfg.d_model)
        self.wpe = nn.Embedding(cfg.context, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)

    @property
    def head_weight(self) -> torch.Tensor:
        """(V, d): the tied output projection over the V real tokens (BOS is never predicted)."""
        return self.wte.weight[: self.cfg.vocab_size]

    def hidden(self, tokens: torch.Tensor) -> torch.Tensor:
        B, S = tokens.shape
        bos = torch.full((B, 1), self.cfg.bos_id, dtype=tokens.dtype, device=tokens.device)
        inputs = torch.cat([bos, tokens[:, :-1]], dim=1)
        x = self.wte(inputs) + self.wpe.weight[:S]
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, S, V) logits; position t scores tokens[:, t]. For evaluation; training uses the fused head."""
        return self.hidden(tokens) @ self.head_weight.t()


def init_model(cfg: GPTConfig, seed: int) -> TinyGPT:
    """GPT-2 initialisation (N(0, 0.02), residual projections scaled by 1/sqrt(2L)), deterministic in seed."""
    gen = torch.Generator().manual_seed(seed)
    model = TinyGPT(cfg)
    resid_std = 0.02 / math.sqrt(2 * cfg.n_layer)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif ".ln_" in name or name.startswith("ln_"):
                p.fill_(1.0)
            else:
                std = resid_std if name.endswith("proj.weight") else 0.02
                p.normal_(0.0, std, generator=gen)
    return model


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
