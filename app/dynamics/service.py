"""Dynamics audits: validate the request and store its strings (prepare), then read results back.

The PCFG generator, the trajectory parser and the measures are pure numpy modules of ``core`` (no torch): the API
uses them to validate a request before anything is queued and to compute per-string results on read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.audits.service import visible_audit_of_kind
from app.auth.keys import Principal
from app.db.engine import session_factory
from app.db.models import Audit
from app.db.models.audit import AuditStatus
from app.db.models.dynamics import DynamicsAudit, DynamicsString
from app.dynamics import repository
from app.dynamics.schemas import (
    DynamicsAuditCreate,
    DynamicsOptions,
    DynamicsSeries,
    PCFGIn,
    StringIn,
    StringSeries,
    TrajectoryFileIn,
)
from app.errors import InvalidInput, NotFound
from app.settings import Settings
from core.dynamics.pcfg import PCFGConfig, generate_pcfg, sample_corpus
from core.dynamics.trajectories import TrajectoryError, parse_trajectories
from core.measures.dynamics import (
    Trajectories,
    counterfactual_score,
    optimal_contextual_threshold,
    per_string,
    summary_json,
)


@dataclass
class _Row:
    string_id: str
    text: str | None
    count: int
    probability: float | None = None
    index: int = 0  # position in the request (identical texts merge into the first)


def prepare_dynamics_audit(session: Session, body: DynamicsAuditCreate, audit: Audit, settings: Settings) -> None:
    """Validate against the limits, store the strings (or imported trajectories) and show the cost up front."""
    if body.trajectories is not None:
        _prepare_imported(session, body.trajectories, audit)
        return
    opts = body.options
    language = None
    if body.pcfg is not None:
        rows, language = _from_pcfg(body.pcfg)
    else:
        rows = _from_request(body.strings or [])
    tokenizer = opts.resolved_tokenizer(generated=body.pcfg is not None)
    lengths = [token_count(r.text or "", tokenizer) for r in rows]
    _check_trainable(rows, lengths, opts, settings, "options.context" if body.pcfg is not None else None)
    passes = opts.folds * opts.epochs
    train_tokens = opts.epochs * (opts.folds - 1) * sum(r.count * (n + 1) for r, n in zip(rows, lengths, strict=True))
    session.add(
        DynamicsAudit(
            audit_id=audit.id,
            source="pcfg" if language else "strings",
            recipe=opts.recipe,
            n_strings=len(rows),
            passes=passes,
            language=language,
        )
    )
    session.flush()
    repository.add_strings(session, [_string_row(audit.id, i, r) for i, r in enumerate(rows)])
    audit.progress_total = passes
    audit.summary = {
        "cost": {
            "passes": passes,
            "runs": opts.folds,
            "epochs": opts.epochs,
            "train_tokens": train_tokens,
            "distinct_strings": len(rows),
            "training_set_size": sum(r.count for r in rows),
            "tokenizer": tokenizer,
        }
    }


def token_count(text: str, tokenizer: str) -> int:
    """Tokens a string costs. For the model's own tokenizer the API (which never loads a model) uses the UTF-8 byte
    count: a byte-level BPE token covers at least one byte, so this is an upper bound; the job checks exactly."""
    return len(text.split()) if tokenizer == "words" else len(text.encode("utf-8"))


def _check_trainable(
    rows: list[_Row], lengths: list[int], opts: DynamicsOptions, settings: Settings, context_field: str | None
) -> None:
    if len(rows) < opts.folds:
        raise InvalidInput(
            "options.folds",
            f"{len(rows)} distinct string(s) cannot fill {opts.folds} folds: give more strings or "
            "lower options.folds (at least 2)",
        )
    empty = [i for i, n in enumerate(lengths) if n == 0]
    if empty:
        raise InvalidInput(f"strings[{rows[empty[0]].index}].text", "a string has no tokens (only whitespace?)")
    longest = max(range(len(rows)), key=lambda i: lengths[i])
    if lengths[longest] + 2 > opts.context:
        message = (
            f"string #{rows[longest].index} has {lengths[longest]} tokens; with BOS and EOS that exceeds the "
            f"context of {opts.context} tokens: raise options.context (at most 1024) or shorten the string"
        )
        raise InvalidInput(context_field or f"strings[{rows[longest].index}].text", message)
    cost = opts.epochs * (opts.folds - 1) * sum(r.count * (n + 1) for r, n in zip(rows, lengths, strict=True))
    if cost > settings.max_dynamics_train_tokens:
        raise InvalidInput(
            "options.epochs",
            f"this audit would train on {cost:,} tokens (E x (K-1) x training-set tokens), over the "
            f"limit of {settings.max_dynamics_train_tokens:,}: lower epochs or folds, or send fewer strings",
        )


def _from_request(strings: list[StringIn]) -> list[_Row]:
    """Identical texts merge (their counts add up): a string's copies must sit in one fold to be held out."""
    by_text: dict[str, _Row] = {}
    ids: dict[str, int] = {}
    for i, s in enumerate(strings):
        sid = s.id if s.id is not None else f"s{i}"
        if sid in ids and strings[ids[sid]].text != s.text:
            raise InvalidInput(f"strings[{i}].id", f"id already used by strings[{ids[sid]}] for another text")
        ids.setdefault(sid, i)
        if s.text in by_text:
            by_text[s.text].count += s.count
        else:
            by_text[s.text] = _Row(sid, s.text, s.count, index=i)
    return list(by_text.values())


def _from_pcfg(spec: PCFGIn) -> tuple[list[_Row], dict[str, Any]]:
    params = spec.model_dump(exclude={"samples"})
    for key in ("rules_per_level", "branching_per_level"):
        params[key] = tuple(params[key]) if params[key] is not None else None
    try:
        corpus = sample_corpus(generate_pcfg(PCFGConfig(**params)), spec.samples, seed=spec.seed)
    except ValueError as exc:
        raise InvalidInput("pcfg", str(exc)) from None
    texts = corpus.texts()
    rows = [
        _Row(f"x{i}", texts[i], count, prob, index=i)
        for i, (count, prob) in enumerate(zip(corpus.counts, corpus.probability, strict=True))
    ]
    language = {
        **spec.model_dump(),
        "entropy_nats": corpus.entropy_nats,
        "expected_length": corpus.expected_length,
        "entropy_nats_per_token": corpus.entropy_nats / (corpus.expected_length + 1),
    }
    return rows, language


def _prepare_imported(session: Session, spec: TrajectoryFileIn, audit: Audit) -> None:
    try:
        traj = parse_trajectories(spec.content.splitlines(keepends=True), spec.format)
    except TrajectoryError as exc:
        raise InvalidInput("trajectories.content", str(exc)) from None
    session.add(
        DynamicsAudit(
            audit_id=audit.id,
            source="imported",
            recipe="imported",
            n_strings=len(traj.string_ids),
            passes=0,
            epochs=list(traj.epochs),
        )
    )
    session.flush()
    freq = traj.frequency
    repository.add_strings(
        session,
        [
            {
                "audit_id": audit.id,
                "position": i,
                "string_id": sid,
                "text": None,
                "count": 1,
                "frequency": None if freq is None else freq[i],
                "probability": None,
                "fold": None,
                "train_loss": [float(v) for v in traj.train_loss[i]],
                "heldout_loss": [float(v) for v in traj.heldout_loss[i]],
            }
            for i, sid in enumerate(traj.string_ids)
        ],
    )
    audit.progress_total = 1
    audit.summary = {
        "cost": {
            "passes": 0,
            "note": "imported trajectories: nothing is trained",
            "distinct_strings": len(traj.string_ids),
            "epochs": len(traj.epochs),
        }
    }


def _string_row(audit_id: str, position: int, row: _Row) -> dict[str, Any]:
    return {
        "audit_id": audit_id,
        "position": position,
        "string_id": row.string_id,
        "text": row.text,
        "count": row.count,
        "frequency": float(row.count),
        "probability": row.probability,
        "fold": None,
        "train_loss": None,
        "heldout_loss": None,
    }


# ---- reading results ----


def dynamics_audit(session: Session, principal: Principal, audit_id: str) -> tuple[Audit, DynamicsAudit]:
    audit = visible_audit_of_kind(session, principal, audit_id, "dynamics")
    link = repository.link(session, audit.id)
    if link is None:
        raise NotFound("this audit has no strings (was it created by another version?)")
    return audit, link


def thresholds(audit: Audit, tau: float | None, margin: float | None) -> tuple[float, float]:
    """The request's tau and margin, else the audit's own."""
    opts = DynamicsOptions.model_validate(audit.options or {})
    return (tau if tau is not None else opts.tau, margin if margin is not None else opts.margin)


def result_row(s: DynamicsString, epochs: list[int], tau: float, margin: float, text: bool) -> dict[str, Any]:
    """One string's table row, computed from its stored trajectories (each measure needs only this string)."""
    traj = Trajectories([s.string_id], list(epochs), np.array([s.train_loss]), np.array([s.heldout_loss]))
    r = per_string(traj, tau, margin)[0]
    outcome = {m: {"flag": r.flags[m], "onset": r.onset[m]} for m in r.flags}
    return {
        "string_id": s.string_id,
        "text": s.text if text else None,
        "count": s.count,
        "frequency": s.frequency,
        "probability": s.probability,
        "fold": s.fold,
        "contextual_threshold": r.contextual_threshold,
        **outcome,
        "train_loss": r.train_loss,
        "heldout_loss": r.heldout_loss,
    }


def result_rows(
    audit_id: str, epochs: list[int], tau: float, margin: float, measure: str | None, flagged: bool | None, text: bool
) -> Iterator[dict[str, Any]]:
    """Runs in its own session: a streamed response outlives the request's session."""
    session = session_factory()()
    try:
        for s in repository.stream_strings(session, audit_id):
            if s.train_loss is None:
                continue
            row = result_row(s, epochs, tau, margin, text)
            if measure is not None and flagged is not None and row[measure]["flag"] != flagged:
                continue
            yield row
    finally:
        session.close()


CSV_FIELDS = [
    "string_id",
    "text",
    "count",
    "frequency",
    "probability",
    "fold",
    "contextual_threshold",
    "recollection",
    "recollection_onset",
    "counterfactual",
    "counterfactual_onset",
    "contextual",
    "contextual_onset",
    "final_train_loss",
    "final_heldout_loss",
    "train_loss",
    "heldout_loss",
]


def csv_row(row: dict[str, Any]) -> dict[str, Any]:
    """Flat: a flag and an onset column per measure; the curves as space-separated numbers."""
    flat = {
        k: row[k] for k in ("string_id", "text", "count", "frequency", "probability", "fold", "contextual_threshold")
    }
    for m in ("recollection", "counterfactual", "contextual"):
        flat[m], flat[f"{m}_onset"] = row[m]["flag"], row[m]["onset"]
    flat["final_train_loss"], flat["final_heldout_loss"] = row["train_loss"][-1], row["heldout_loss"][-1]
    flat["train_loss"] = " ".join(f"{v:.6g}" for v in row["train_loss"])
    flat["heldout_loss"] = " ".join(f"{v:.6g}" for v in row["heldout_loss"])
    return flat


def series(
    session: Session,
    audit: Audit,
    link: DynamicsAudit,
    string_ids: list[str] | None,
    limit: int,
    tau: float | None,
    margin: float | None,
) -> DynamicsSeries:
    """Plot-ready series: per-epoch shares and mean losses over all strings (from the job's summary, or recomputed
    when tau/margin differ), and the loss curves of selected strings with their three thresholds."""
    if not link.epochs or audit.status != AuditStatus.SUCCEEDED:
        raise NotFound(f"this audit has no results yet (status {audit.status})")
    tau_, margin_ = thresholds(audit, tau, margin)
    per_epoch = _per_epoch(audit, link, tau_, margin_)
    chosen = (
        list(repository.stream_strings(session, audit.id, string_ids))
        if string_ids
        else repository.first_strings(session, audit.id, limit)
    )
    curves = []
    for s in chosen:
        train, held = np.array([s.train_loss]), np.array([s.heldout_loss])
        curves.append(
            StringSeries(
                string_id=s.string_id,
                train_loss=list(s.train_loss),
                heldout_loss=list(s.heldout_loss),
                counterfactual_score=[float(v) for v in counterfactual_score(train, held)[0]],
                recollection_threshold=tau_,
                contextual_threshold=float(optimal_contextual_threshold(held)[0]),
                counterfactual_margin=margin_,
            )
        )
    return DynamicsSeries(**per_epoch, strings=curves)


def _per_epoch(audit: Audit, link: DynamicsAudit, tau: float, margin: float) -> dict[str, Any]:
    summary = audit.summary or {}
    if summary.get("params") != {"tau": tau, "margin": margin}:
        summary = _resummarize(audit.id, link, tau, margin)
    rows = summary["per_epoch"]
    weighted = rows[0].get("share_weighted") is not None
    measures = ("recollection", "counterfactual", "contextual")
    return {
        "epochs": [r["epoch"] for r in rows],
        "share": {m: [r["share"][m] for r in rows] for m in measures},
        "share_weighted": {m: [r["share_weighted"][m] for r in rows] for m in measures} if weighted else None,
        "mean_train_loss": [r["mean_train_loss"] for r in rows],
        "mean_heldout_loss": [r["mean_heldout_loss"] for r in rows],
        "best_heldout_epoch": summary["best_heldout_epoch"],
    }


def _resummarize(audit_id: str, link: DynamicsAudit, tau: float, margin: float) -> dict[str, Any]:
    """The summary at other thresholds, computed as the job computes it (core.measures.dynamics.summary_json)."""
    session = session_factory()()
    try:
        return summary_json(repository.trajectories(session, audit_id, link.epochs or []), tau, margin)
    finally:
        session.close()
