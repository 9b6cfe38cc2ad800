"""Reproduce the capacity of Morris et al.'s smallest model (1 layer, width 32, V = 2048, S = 64; 80,416
parameters) on this CPU and print bits/parameter next to the paper's 4.23 (fp32) and 3.93 (bf16).

    python -m benchmarks.capacity_table                 # 30 minutes, fp32 + bf16, N = 500 and 700, both cores
    python -m benchmarks.capacity_table --quick         # ~3 minutes smoke run (numbers far from converged)
    python -m benchmarks.capacity_table --minutes 10 --ns 500 --bf16-ns ""   # fp32 only
    python -m benchmarks.capacity_table --device cuda --minutes 0 --steps 200000 --chunk 65536   # GPU worker

It first times one training step side by side on the batch the cells train with: the stock PyTorch path
(full (B·S, V) logits, F.cross_entropy, autograd) against the lean loop (fused chunked head, one shard per
core), and prints the ratio. Then it trains one model per (precision, N) cell for an equal share of the budget
(Adam on batches of 125 sequences drawn with replacement, lr 3e-2 with a cosine decay that ends when the
cell's time does), printing a convergence curve (bits/param against training time), and finally the table:
memorized bits Σ max(0, S·log2 V − NLL₂(x|θ)), capacity = max over N, bits/param, loss-threshold MIA F1/AUC
against held-out uniform samples, and the greedy extraction rate from 32-token prefixes.

Settings that matter on a CPU (measured here, 2.5-4 minute runs of N = 500): 4 heads of width 8 reach
2.90 bits/param where 1 head of width 32 reaches 2.54-2.58 in the same time (same parameter count; 8 heads
also 2.90, 16 heads 2.73); batches of 125 beat full-batch steps of 500 (2.67 vs 2.60 after ~3.5 min).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from core.measures import capacity as cap
from workers.training import (
    GPTConfig,
    StepInfo,
    TrainConfig,
    Trainer,
    init_model,
    measure_cell,
    sequence_nll,
    uniform_tokens,
)

PAPER_BITS_PER_PARAM = {"fp32": 4.23, "bf16": 3.93}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0, help="total budget incl. the step-time comparison")
    ap.add_argument("--quick", action="store_true", help="3-minute smoke run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ns", default="500,700", help="comma-separated dataset sizes for fp32")
    ap.add_argument("--bf16-ns", default="500,700", help="dataset sizes for bf16 ('' to skip)")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument(
        "--heads",
        type=int,
        default=4,
        help="4 (head width 8): memorizes far faster per second than 1 head here, same parameters",
    )
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-2)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument(
        "--schedule",
        choices=["cosine", "constant"],
        default="cosine",
        help="cosine: decay to --min-lr-ratio over the steps the cell's time budget allows",
    )
    ap.add_argument("--min-lr-ratio", type=float, default=0.01)
    ap.add_argument(
        "--batch-size", type=int, default=125, help="sequences per Adam step, sampled with replacement; 0 = full batch"
    )
    ap.add_argument("--steps", type=int, default=None, help="step cap per cell (default: time budget only)")
    ap.add_argument("--chunk", type=int, default=None, help="positions per fused-head chunk (default: by V)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="also write all numbers here")
    args = ap.parse_args(argv)
    if args.quick:
        args.minutes = 3.0
    if args.batch_size is not None and args.batch_size <= 0:
        args.batch_size = None
    if args.minutes <= 0 and args.steps is None:
        ap.error("--minutes 0 (no time budget) needs --steps")
    return args


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",") if t.strip()]


def step_seconds(trainer: Trainer, steps: int) -> float:
    trainer.run(until_step=trainer.step + 1)  # warm-up (allocations, thread pools)
    start = time.perf_counter()
    trainer.run(until_step=trainer.step + steps)
    return (time.perf_counter() - start) / steps


def stock_step_seconds(cfg: GPTConfig, tokens: torch.Tensor, lr: float, steps: int) -> float:
    """The usual way: materialise all logits, F.cross_entropy, autograd, Adam."""
    model = init_model(cfg, 0).to(tokens.device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def one() -> None:
        opt.zero_grad(set_to_none=True)
        logits = model.logits(tokens)
        F.cross_entropy(logits.reshape(-1, cfg.vocab_size), tokens.reshape(-1)).backward()
        opt.step()

    one()
    start = time.perf_counter()
    for _ in range(steps):
        one()
    return (time.perf_counter() - start) / steps


def compare_step_time(cfg: GPTConfig, tokens: torch.Tensor, args: argparse.Namespace, steps: int) -> dict:
    stock = stock_step_seconds(cfg, tokens, args.lr, steps)
    lean_cfg = TrainConfig(lr=args.lr, chunk_positions=args.chunk, head_shards=args.threads)
    lean = step_seconds(Trainer(init_model(cfg, 0).to(tokens.device), tokens, lean_cfg), steps)
    print(f"step time, N={tokens.shape[0]}, {steps} steps each, {args.threads} threads:")
    print(f"  stock (full logits + F.cross_entropy + autograd): {stock * 1000:8.1f} ms/step")
    print(f"  lean  (fused chunked head, {args.threads} shards):          {lean * 1000:8.1f} ms/step")
    print(f"  speed-up: {stock / lean:.2f}x", flush=True)
    return {"stock_ms": stock * 1000, "lean_ms": lean * 1000, "ratio": stock / lean}


def run_cell(
    cfg: GPTConfig, n: int, precision: str, seconds: float, step_estimate: float, args: argparse.Namespace
) -> dict:
    both = uniform_tokens(n, cfg.seq_len, cfg.vocab_size, seed=args.seed * 1_000_003 + n, heldout=n)
    tokens, held_out = both[:n].to(args.device), both[n:].to(args.device)
    model = init_model(cfg, args.seed).to(args.device)
    # The schedule needs a step count: what the time budget allows at the measured step time (or --steps).
    steps = args.steps or max(args.warmup + 1, int(seconds / step_estimate))
    tcfg = TrainConfig(
        steps=steps,
        lr=args.lr,
        warmup_steps=args.warmup,
        schedule=args.schedule,
        min_lr_ratio=args.min_lr_ratio,
        batch_size=args.batch_size,
        precision=precision,
        chunk_positions=args.chunk,
        head_shards=args.threads if args.device == "cpu" else 1,
        seed=args.seed,
    )
    print(f"  planned {steps} steps ({args.schedule} lr {args.lr} -> {args.lr * args.min_lr_ratio:g})", flush=True)
    params = cfg.param_count()
    curve: list[tuple[float, int, float]] = []
    next_report = [0.0]
    trainer = Trainer(model, tokens, tcfg)
    replan_at = args.warmup + 30

    def on_step(info: StepInfo) -> bool:
        if info.step == replan_at and not args.steps and args.minutes > 0:
            # the schedule must end when the budget does: re-plan from this cell's own measured step time
            planned = max(replan_at + 1, int(seconds / (info.seconds / info.step)))
            trainer.config = replace(trainer.config, steps=planned)
            print(f"  re-planned to {planned} steps at {info.seconds / info.step * 1000:.1f} ms/step", flush=True)
        if info.seconds >= next_report[0] or info.step >= trainer.config.steps:
            if info.batch_index is None:  # full batch: the step already scored every sequence
                seq_nll = info.seq_nll.cpu().numpy()
            else:
                seq_nll = sequence_nll(trainer.model, tokens).cpu().numpy()  # not counted as training time
            bits = cap.memorized_bits(cap.nats_to_bits(seq_nll), cfg.seq_len, cfg.vocab_size)
            curve.append((info.seconds, info.step, bits / params))
            print(
                f"  [{precision} N={n}] t={info.seconds:7.1f}s step={info.step:6d} "
                f"loss={info.loss_bits_per_token:6.3f} bits/token  bits/param={bits / params:.3f}",
                flush=True,
            )
            next_report[0] = info.seconds + max(5.0, seconds / 20)
        return info.seconds >= seconds

    trainer.run(callback=on_step)
    return summarize_cell(trainer, tokens, held_out, precision, curve)


def summarize_cell(trainer: Trainer, tokens: torch.Tensor, held_out: torch.Tensor, precision: str, curve: list) -> dict:
    cfg = trainer.model.cfg
    n = tokens.shape[0]
    measures = measure_cell(trainer.model, tokens, held_out, cfg.seq_len // 2, mia_seed=n)
    return {
        "precision": precision,
        "n": n,
        "steps": trainer.step,
        "seconds": trainer.seconds,
        "entropy_bits": cap.dataset_entropy_bits(n, cfg.seq_len, cfg.vocab_size),
        **measures,
        "curve": curve,
    }


def print_table(cells: list[dict], params: int) -> dict[str, float]:
    print(
        f"\n{'prec':5} {'N':>6} {'steps':>6} {'min':>5} {'mem bits':>9} {'H(D)':>9} {'bits/param':>10} "
        f"{'MIA F1':>6} {'AUC':>5} {'extract':>7}"
    )
    for c in cells:
        print(
            f"{c['precision']:5} {c['n']:6d} {c['steps']:6d} {c['seconds'] / 60:5.1f} {c['memorized_bits']:9.0f} "
            f"{c['entropy_bits']:9.0f} {c['bits_per_param']:10.3f} {c['mia_f1']:6.3f} {c['mia_auc']:5.3f} "
            f"{c['extraction_rate']:7.3f}"
        )
    capacity: dict[str, float] = {}
    print(f"\ncapacity (max over N) for {params:,} parameters:")
    for precision in ("fp32", "bf16"):
        by_n = {c["n"]: c["memorized_bits"] for c in cells if c["precision"] == precision}
        if not by_n:
            continue
        n_best, bits = cap.capacity_bits(by_n)
        capacity[precision] = per_param = bits / params
        paper = PAPER_BITS_PER_PARAM[precision]
        print(
            f"  {precision}: {per_param:.2f} bits/param (at N={n_best})   paper: {paper:.2f}   "
            f"ratio {per_param / paper:.2f}"
        )
    return capacity


def print_gpu_hint(capacity: dict[str, float], args: argparse.Namespace) -> None:
    if capacity.get("fp32", 0.0) >= 3.0:
        return
    print(
        '\nfp32 did not reach 3.0 bits/param in this budget. Morris et al. train until saturation, "usually around'
        '\n1M steps" (J. Morris); the curve above is still rising. To finish on a GPU worker:'
        f"\n  python -m benchmarks.capacity_table --device cuda --minutes 0 --steps 200000 --chunk 65536 "
        f"--ns 500,700,1000 --bf16-ns 500,700,1000 --lr {args.lr} --schedule cosine"
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = GPTConfig(n_layer=args.layers, d_model=args.width, n_head=args.heads, vocab_size=args.vocab, seq_len=args.seq)
    params = cfg.param_count()
    cells_spec = [("fp32", n) for n in _ints(args.ns)] + [("bf16", n) for n in _ints(args.bf16_ns)]
    print(
        f"model: {cfg.to_dict()} = {params:,} parameters; lr={args.lr} warmup={args.warmup} "
        f"batch={'full' if args.batch_size is None else args.batch_size}; budget {args.minutes} min",
        flush=True,
    )
    t0 = time.perf_counter()
    compare_n = min(args.batch_size or 10**9, max(n for _, n in cells_spec))  # the batch one step sees
    timing = compare_step_time(
        cfg,
        uniform_tokens(compare_n, cfg.seq_len, cfg.vocab_size, 1).to(args.device),
        args,
        steps=3 if args.quick else 5,
    )
    left = args.minutes * 60 - (time.perf_counter() - t0)
    # each cell also needs ~2 evaluation passes; keep 4 % of its share for them
    per_cell = max(1.0, 0.96 * left / len(cells_spec)) if args.minutes > 0 else float("inf")
    cells = []
    for precision, n in cells_spec:
        print(f"\ncell {precision} N={n}: {per_cell / 60:.1f} min", flush=True)
        per_step = min(n, args.batch_size or n)  # a step's cost is proportional to the sequences it sees
        step_estimate = timing["lean_ms"] / 1000 * per_step / compare_n  # re-measured once the cell runs
        cells.append(run_cell(cfg, n, precision, per_cell, step_estimate, args))
    capacity = print_table(cells, params)
    print_gpu_hint(capacity, args)
    print(f"\ntotal wall time {(time.perf_counter() - t0) / 60:.1f} min")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "config": cfg.to_dict(),
                    "params": params,
                    "timing": timing,
                    "cells": cells,
                    "capacity_bits_per_param": capacity,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
