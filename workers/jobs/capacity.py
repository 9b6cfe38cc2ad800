"""Capacity audit job (Morris et al. 2025).

Uniform mode: train every grid cell from scratch on N uniform sequences (regenerated from the seed), then
record memorized bits, train / held-out loss, loss-threshold MIA F1 and AUC, and the greedy extraction rate.
Progress counts optimizer steps over the whole grid. A running cell checkpoints (model, optimizer, step)
into its row every `checkpoint_seconds`, so a restarted job resumes where it stopped; finished cells are
skipped, so running the job twice is safe. Cancellation is seen at the next progress report.

Text mode: score every sample with the audited model and the reference (sentence NLLs from workers.lm) and
store mem_U(x) = max(0, NLL_ref − NLL_model) in bits with the sample's TF-IDF rarity.
"""

from __future__ import annotations

import io
import re
import time
from typing import Any

import numpy as np
import torch

from app.capacity import repository
from app.capacity.schemas import CapacityAuditOptions
from app.db.engine import session_scope
from app.db.models.capacity import CapacityCell
from app.db.vocabulary import CellStatus
from app.settings import get_settings
from core.measures import capacity as cap
from workers.jobs.common import JobContext, JobError, run_audit_job
from workers.lm.base import ScoringError
from workers.training import (
    GPTConfig,
    StepInfo,
    TrainConfig,
    Trainer,
    init_model,
    measure_cell,
    uniform_tokens,
)


def run(audit_id: str) -> None:
    run_audit_job(audit_id, "capacity", CapacityAuditOptions, _audit)


def _audit(ctx: JobContext[CapacityAuditOptions]) -> dict[str, Any]:
    if ctx.options.mode == "text":
        return _text_audit(ctx)
    options = ctx.options
    with session_scope() as s:
        plan = [(c.position, c.steps_total, c.steps_done, c.status) for c in repository.cells(s, ctx.audit_id)]
    if not plan:
        raise JobError("the audit has no cells (was it created by another version?)")
    total = sum(steps for _, steps, _, _ in plan)
    done_before = {pos: (steps if status == CellStatus.DONE else done) for pos, steps, done, status in plan}
    for position, _, _, status in plan:
        if status == CellStatus.DONE:
            continue
        base = sum(v for p, v in done_before.items() if p != position)
        _train_cell(ctx, position, options, lambda step, base=base: ctx.progress(base + step, total))
        done_before[position] = next(steps for p, steps, _, _ in plan if p == position)
        ctx.progress(sum(done_before.values()), total, force=True)
    return _summary(ctx.audit_id)


def _cell_config(c: CapacityCell, context: int | None) -> GPTConfig:
    return GPTConfig(
        n_layer=c.n_layer,
        d_model=c.d_model,
        n_head=c.n_head,
        vocab_size=c.vocab_size,
        seq_len=c.seq_len,
        n_positions=context,
    )


def _train_cell(ctx: JobContext, position: int, options: CapacityAuditOptions, report) -> None:
    context = options.grid.context if options.grid is not None else None
    with session_scope() as s:
        c = repository.cell(s, ctx.audit_id, position)
        cfg, n, seed, precision = _cell_config(c, context), c.n_samples, c.seed, c.precision
        checkpoint, curve = c.checkpoint, list(c.curve or [])
        c.status = CellStatus.RUNNING
    device = _device()
    tokens = uniform_tokens(n, cfg.seq_len, cfg.vocab_size, seed=_data_seed(seed, n)).to(device)
    shards = torch.get_num_threads() if device.type == "cpu" else 1
    tcfg = TrainConfig(
        steps=options.steps,
        lr=options.lr,
        warmup_steps=options.warmup_steps,
        schedule=options.schedule,
        batch_size=options.batch_size,
        precision=precision,
        head_shards=shards,
        seed=seed,
    )
    trainer = Trainer(init_model(cfg, seed).to(device), tokens, tcfg)
    if checkpoint is not None:
        trainer.load_state_dict(torch.load(io.BytesIO(checkpoint), map_location=device, weights_only=False))
    every = max(1, options.steps // 50)  # ~50 curve points per cell
    last_save = [time.monotonic()]

    def on_step(info: StepInfo) -> bool:
        if info.batch_index is None and (info.step % every == 0 or info.step == 1):
            curve.append([info.step - 1, info.seconds, _memorized(info.seq_nll, cfg)])
        report(info.step)  # raises Cancelled when the audit was cancelled
        if time.monotonic() - last_save[0] >= options.checkpoint_seconds and info.step < options.steps:
            _save_checkpoint(ctx.audit_id, position, trainer, curve)
            last_save[0] = time.monotonic()
        return False

    trainer.run(callback=on_step)
    _store_results(ctx.audit_id, position, trainer, tokens, curve, options, seed)


def _device() -> torch.device:
    """A GPU when the worker has one (and settings allow), else the CPU."""
    wanted = get_settings().device
    use_cuda = wanted == "cuda" or (wanted == "auto" and torch.cuda.is_available())
    return torch.device("cuda" if use_cuda else "cpu")


def _data_seed(seed: int, n: int) -> int:
    # distinct cells of one seed get distinct datasets; the same (seed, N) always regenerates the same data
    return seed * 1_000_003 + n


def _memorized(seq_nll: torch.Tensor, cfg: GPTConfig) -> float:
    return cap.memorized_bits(cap.nats_to_bits(seq_nll.cpu().numpy()), cfg.seq_len, cfg.vocab_size)


def _save_checkpoint(audit_id: str, position: int, trainer: Trainer, curve: list) -> None:
    buf = io.BytesIO()
    torch.save(trainer.state_dict(), buf)
    with session_scope() as s:
        repository.update_cell(
            s,
            audit_id,
            position,
            checkpoint=buf.getvalue(),
            steps_done=trainer.step,
            seconds=trainer.seconds,
            curve=list(curve),
        )


def _store_results(
    audit_id: str,
    position: int,
    trainer: Trainer,
    tokens: torch.Tensor,
    curve: list,
    options: CapacityAuditOptions,
    cell_seed: int,
) -> None:
    cfg = trainer.model.cfg
    n = tokens.shape[0]
    held_n = options.heldout_size or min(n, 1000)
    held = uniform_tokens(n, cfg.seq_len, cfg.vocab_size, _data_seed(cell_seed, n), heldout=held_n)[n:]
    held = held.to(tokens.device)
    prefix = cfg.seq_len // 2 if options.extraction_prefix is None else min(options.extraction_prefix, cfg.seq_len - 1)
    # the MIA's balanced sets are drawn with the cell's data seed at N = its size
    measures = measure_cell(trainer.model, tokens, held, prefix, mia_seed=_data_seed(cell_seed, n))
    curve.append([trainer.step, trainer.seconds, measures["memorized_bits"]])
    values = dict(
        status=CellStatus.DONE,
        steps_done=trainer.step,
        seconds=trainer.seconds,
        **measures,
        curve=curve,
        checkpoint=None,
    )
    with session_scope() as s:
        repository.update_cell(s, audit_id, position, **values)


def _summary(audit_id: str) -> dict[str, Any]:
    with session_scope() as s:
        cells = repository.cells(s, audit_id)
        per_arch = cap.capacity_by_architecture(cells)
        shares = {c.position: c.memorized_bits / c.entropy_bits for c in cells if c.memorized_bits is not None}
    return {"mode": "uniform", "cells": len(shares), "capacity": per_arch, "share_memorized_by_cell": shares}


def _text_audit(ctx: JobContext[CapacityAuditOptions]) -> dict[str, Any]:
    with session_scope() as s:
        rows = [(t.position, t.text) for t in repository.texts(s, ctx.audit_id)]
    ctx.progress(0, 2 * len(rows), force=True)
    target, reference = ctx.scorer(), ctx.scorer(ctx.options.reference)
    try:
        nll_target = _bits(target.score([("", text) for _, text in rows]))
        ctx.progress(len(rows), 2 * len(rows), force=True)
        nll_ref = _bits(reference.score([("", text) for _, text in rows]))
    except ScoringError as exc:
        raise JobError(f"cannot score a text: {exc}") from exc
    mem = cap.text_memorization_bits(nll_ref, nll_target)
    rarity = cap.tfidf_rarity([re.findall(r"\w+", text.lower()) for _, text in rows])
    with session_scope() as s:
        for i, (position, _) in enumerate(rows):
            repository.update_text(
                s,
                ctx.audit_id,
                position,
                nll_target_bits=float(nll_target[i]),
                nll_reference_bits=float(nll_ref[i]),
                memorized_bits=float(mem[i]),
                rarity=float(rarity[i]),
            )
    ctx.progress(2 * len(rows), 2 * len(rows), force=True)
    return {
        "mode": "text",
        "samples": len(rows),
        "reference": ctx.options.reference,
        "total_memorized_bits": float(mem.sum()),
        "memorized_samples": int((mem > 0).sum()),
    }


def _bits(nats: list[float]) -> np.ndarray:
    return cap.nats_to_bits(nats)
