"""Dynamics audit job (Ghosh et al., 2025): train K runs x E epochs (or take imported trajectories), store every
string's train and held-out loss per epoch, and summarize recollection, counterfactual and contextual memorization.

Loads everything by audit id. Safe to run twice: training is deterministic given the options' seed and its results
overwrite the previous attempt's. Progress is K x E passes; a cancellation stops the run at the next epoch.
"""

from __future__ import annotations

from typing import Any

from app.db.engine import session_scope
from app.db.models import Audit
from app.dynamics import repository
from app.dynamics.schemas import DynamicsOptions
from core.measures.dynamics import summary_json
from workers.dynamics.finetune import run_finetune
from workers.dynamics.runner import KFoldConfig, encode_texts, run_kfold
from workers.jobs.common import JobContext, JobError, run_audit_job


def run(audit_id: str) -> None:
    run_audit_job(audit_id, "dynamics", DynamicsOptions, _audit)


def _load(ctx: JobContext) -> tuple[Any, list[Any], dict[str, Any]]:
    with session_scope() as s:
        link = repository.link(s, ctx.audit_id)
        if link is None:
            raise JobError("the audit has no strings (was it created by another version?)")
        strings = repository.strings_in_order(s, ctx.audit_id)
        cost = ((s.get(Audit, ctx.audit_id).summary or {}).get("cost")) or {}
        s.expunge_all()
    return link, strings, cost


def tokenize(texts: list[str], tokenizer: str) -> tuple[list[list[int]], int]:
    if tokenizer == "words":
        vocab = {w: i for i, w in enumerate(sorted({w for t in texts for w in t.split()}))}
        return [[vocab[w] for w in t.split()] for t in texts], max(1, len(vocab))
    return encode_texts(texts)


def _train(ctx: JobContext, strings: list[Any], opts: DynamicsOptions, tokenizer: str) -> tuple[list[dict], list[int]]:
    k, e = opts.folds, opts.epochs
    cfg = KFoldConfig(
        folds=k,
        epochs=e,
        d_model=opts.d_model,
        n_layer=opts.n_layer,
        n_head=opts.n_head,
        batch_size=opts.batch_size,
        lr=opts.learning_rate,
        context=opts.context,
        seed=opts.seed,
    )
    texts, counts, ids = [s.text for s in strings], [s.count for s in strings], [s.string_id for s in strings]
    try:
        if opts.recipe == "finetune":  # loads the model itself: the lifecycle reports a model that cannot load
            result = run_finetune(ctx.model, texts, counts, cfg, ids, on_pass=lambda done: ctx.progress(done, k * e))
        else:
            seqs, vocab = tokenize(texts, tokenizer)
            result = run_kfold(seqs, counts, vocab, cfg, ids, on_epoch=lambda epoch: ctx.progress(epoch * k, k * e))
    except ValueError as exc:  # strings that do not fit the model (checked exactly here; the API checks bytes)
        raise JobError(str(exc)) from exc
    traj = result.trajectories
    rows = [
        {
            "position": s.position,
            "fold": result.folds[i],
            "train_loss": [float(v) for v in traj.train_loss[i]],
            "heldout_loss": [float(v) for v in traj.heldout_loss[i]],
        }
        for i, s in enumerate(strings)
    ]
    return rows, list(traj.epochs)


def _audit(ctx: JobContext[DynamicsOptions]) -> dict[str, Any]:
    opts = ctx.options
    link, strings, cost = _load(ctx)
    info: dict[str, Any] = {"cost": cost, "source": link.source, "recipe": link.recipe, "language": link.language}
    if link.source == "imported":
        ctx.progress(0, 1, force=True)
        epochs = list(link.epochs or [])
    else:
        tokenizer = opts.resolved_tokenizer(generated=link.source == "pcfg")
        ctx.progress(0, opts.folds * opts.epochs, force=True)
        rows, epochs = _train(ctx, strings, opts, tokenizer)
        ctx.check_cancelled()
        with session_scope() as s:
            repository.save_trajectories(s, ctx.audit_id, rows, epochs)
    with session_scope() as s:
        traj = repository.trajectories(s, ctx.audit_id, epochs)
    return {**info, **summary_json(traj, opts.tau, opts.margin)}
