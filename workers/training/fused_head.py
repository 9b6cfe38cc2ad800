"""Fused, chunked LM head + cross-entropy: loss and both gradients in one pass, logits never stored whole.

Why: for the paper's smallest model (width 32, V = 2048) the head is ~80 % of a step's FLOPs, and the stock
path (logits → log_softmax → NLL, then autograd) streams the (N·S, V) logits through memory five or six times
(262 MB for 500 sequences of 64 tokens). Here each chunk of positions is multiplied, soft-maxed in place and
turned into its gradient while it sits in cache:

    p = softmax(h_c Wᵀ);  nll = −log p[y];  p[y] −= 1;  ∂h_c = p W;  ∂Wᵀ += h_cᵀ p

Three matmuls per chunk — the minimum for an exact gradient — and one softmax pass. The gradients are
computed in the forward call and scaled by the incoming gradient in backward, so this is only valid when
the returned scalar is the loss being differentiated (it is: training minimises the summed NLL).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import torch

CHUNK_ELEMENTS = 1 << 19  # a chunk's (rows, V) block: 2 MB of fp32, the L2 size of two cores here


def auto_chunk(vocab_size: int) -> int:
    """Rows per chunk so that a chunk's logits fit in cache: 256 for V = 2048; one big chunk for tiny V
    (where the per-chunk Python overhead would dominate)."""
    return max(16, CHUNK_ELEMENTS // vocab_size)


def _chunk_nll_and_grad(h: torch.Tensor, wt: torch.Tensor, y: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
    """Writes softmax − onehot into ``buf`` (rows, V) and returns the per-row NLL (nats)."""
    rows = h.shape[0]
    p = buf[:rows]
    torch.mm(h, wt, out=p)
    torch.ops.aten._softmax.out(p, 1, False, out=p)
    idx = torch.arange(rows, device=h.device)
    p_true = p[idx, y]
    nll = -torch.log(p_true)
    if not bool(torch.isfinite(nll).all()):
        # p underflowed to 0 (a logit gap > ~100 nats): recompute those rows in log space, exactly.
        bad = ~torch.isfinite(nll)
        logits = h[bad] @ wt
        nll[bad] = -torch.log_softmax(logits, 1).gather(1, y[bad, None]).squeeze(1)
    p[idx, y] = p_true - 1.0
    return nll


def _shard(
    h: torch.Tensor,
    w: torch.Tensor,
    wt: torch.Tensor,
    y: torch.Tensor,
    nll_out: torch.Tensor,
    grad_h: torch.Tensor,
    chunk: int,
    lo: int,
    hi: int,
) -> torch.Tensor:
    """Processes rows [lo, hi) chunk by chunk; fills nll_out and grad_h there, returns this shard's ∂Wᵀ."""
    grad_wt = torch.zeros(w.shape[1], w.shape[0], dtype=h.dtype, device=h.device)
    buf = torch.empty(min(chunk, max(1, hi - lo)), w.shape[0], dtype=h.dtype, device=h.device)
    for s in range(lo, hi, chunk):
        e = min(s + chunk, hi)
        hc = h[s:e]
        nll_out[s:e] = _chunk_nll_and_grad(hc, wt, y[s:e], buf)
        p = buf[: e - s]
        torch.mm(p, w, out=grad_h[s:e])
        grad_wt.addmm_(hc.t(), p)
    return grad_wt


@lru_cache(maxsize=4)
def _pool(workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fused-head")


def _sharded(args: tuple, bounds: list[tuple[int, int]]) -> torch.Tensor:
    """One single-threaded shard per core: torch releases the GIL inside ops, and unlike intra-op
    parallelism there is no barrier per chunk op (which stalls badly when other processes share the cores)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        futures = [_pool(len(bounds)).submit(_shard, *args, lo, hi) for lo, hi in bounds]
        parts = [f.result() for f in futures]
    finally:
        torch.set_num_threads(previous)
    total = parts[0]
    for part in parts[1:]:
        total += part
    return total


class LinearCrossEntropy(torch.autograd.Function):
    """sum_i −log softmax(h_i Wᵀ)[y_i] with gradients for h (M, d) and W (V, d); per-row NLL as side output."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        h: torch.Tensor,
        w: torch.Tensor,
        y: torch.Tensor,
        nll_out: torch.Tensor,
        chunk: int,
        shards: int,
    ) -> torch.Tensor:
        m, d = h.shape
        wc = w.detach().contiguous()
        grad_h = torch.empty(m, d, dtype=h.dtype, device=h.device)
        bounds = [(m * i // shards, m * (i + 1) // shards) for i in range(shards)]
        args = (h.detach(), wc, wc.t().contiguous(), y, nll_out, grad_h, chunk)
        grad_wt = _shard(*args, *bounds[0]) if shards == 1 else _sharded(args, bounds)
        ctx.save_for_backward(grad_h, grad_wt)
        return nll_out.sum()

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad_out: torch.Tensor):  # type: ignore[override]
        grad_h, grad_wt = ctx.saved_tensors
        return grad_h * grad_out, grad_wt.t() * grad_out, None, None, None, None


def linear_cross_entropy(
    h: torch.Tensor,
    w: torch.Tensor,
    y: torch.Tensor,
    nll_out: torch.Tensor | None = None,
    chunk: int | None = None,
    shards: int = 1,
) -> torch.Tensor:
    """Summed NLL (nats) of targets ``y`` (M,) under logits h (M, d) @ w (V, d)ᵀ; differentiable in h and w.

    ``nll_out`` (M,) receives each position's NLL (no gradient). ``chunk`` rows at a time (default: see
    ``auto_chunk``). ``shards`` > 1 splits the rows over that
    many threads, each running single-threaded torch ops (use the number of cores). fp32 throughout.
    """
    if nll_out is None:
        nll_out = torch.empty(h.shape[0], dtype=torch.float32, device=h.device)
    shards = max(1, min(shards, h.shape[0]))
    return LinearCrossEntropy.apply(h, w, y, nll_out, chunk or auto_chunk(w.shape[0]), shards)


@torch.no_grad()
def nll_per_position(h: torch.Tensor, w: torch.Tensor, y: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """(M,) NLL in nats without gradients, in log space (exact even for very confident wrong predictions)."""
    out = torch.empty(h.shape[0], dtype=torch.float32, device=h.device)
    wt = w.detach().t().contiguous()
    for s in range(0, h.shape[0], chunk):
        logits = h[s : s + chunk] @ wt
        out[s : s + chunk] = -torch.log_softmax(logits, 1).gather(1, y[s : s + chunk, None]).squeeze(1)
    return out
