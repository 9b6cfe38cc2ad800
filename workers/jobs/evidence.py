"""What a job records about its run, beside its results: the provenance block on the audit (core.provenance:
versions, scorer backend and settings, the model's fingerprint, the nulls that judge it) and, when the run ends,
an `audit_finished` entry in the evidence record (app/evidence), in the same transaction as the final status.

The entry holds counts and statistics per property, never a name or a value. P-values are not computed here:
they depend on the null (which may still be running when the audit ends); the forget-set export's entry records
the p-values its verdicts used."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.orm import Session

from app.db.models import Audit
from app.db.vocabulary import ACTIVE_STATUSES, AuditStatus
from app.evidence import repository as evidence
from app.evidence.schemas import EntryKind
from app.nulls import repository as nulls
from app.nulls.config import subject_null_key
from app.settings import Settings
from app.subjects import repository as subjects
from core import provenance
from workers.lm.base import ModelLoadError, Scorer
from workers.lm.registry import resolve_spec

log = logging.getLogger("memaudit.jobs")
SERVED_SETTINGS = ("served_model", "batch_size", "concurrency", "reference", "reference_tolerance")


def scorer_settings(model: str, scorer: Scorer, settings: Settings) -> dict[str, Any]:
    """The backend and the settings that change what it computes (never a path, URL or secret)."""
    try:
        spec = resolve_spec(model, settings)
    except ModelLoadError:
        spec = None
    backend = spec.backend if spec else None
    out: dict[str, Any] = {
        "backend": backend,
        "implementation": type(scorer).__name__,
        "dtype": spec.dtype if spec else None,
        "gguf": bool(spec and spec.gguf_file),
        "device": settings.device,
        "score_batch_tokens": settings.score_batch_tokens,
        "torch_threads": settings.torch_threads,
        "max_length": getattr(scorer, "max_length", None),
    }
    if spec and backend == "openai":
        out |= {name: getattr(spec, name) for name in SERVED_SETTINGS}
    return out


def null_refs(session: Session, audit: Audit, pids: list[str], fingerprint: str | None) -> list[dict[str, Any]]:
    """The null each property of a subject audit is judged against (its configuration key, and the null audit a
    verdict would use now: ready, or pending), or, for a null audit, its own distributions."""
    own = nulls.of_audit(session, audit.id)
    if own:
        return [{"property": d.property_id, "null_audit_id": d.audit_id, "config_key": d.key} for d in own]
    refs = []
    for pid in pids:
        key = subject_null_key(session, audit, pid)
        rows = nulls.distributions(session, audit.model, key)
        ready = [
            d for d, st in rows if st == AuditStatus.SUCCEEDED and d.n_facts and fingerprint in (None, d.fingerprint)
        ]
        pending = [d for d, st in rows if st in ACTIVE_STATUSES]
        found, status = (ready[0], "ready") if ready else (pending[0], "pending") if pending else (None, "missing")
        refs.append(
            {"property": pid, "null_audit_id": found.audit_id if found else None, "config_key": key, "status": status}
        )
    return refs


def record_provenance(session: Session, audit: Audit, results: list, scorer: Scorer | None, settings: Settings) -> dict:
    """Write the audit's provenance block (the caller commits) and return it."""
    fingerprint = getattr(scorer, "fingerprint", None) or None
    pids = sorted({r.property_id for r in results})
    block = provenance.provenance(
        scorer=scorer_settings(audit.model, scorer, settings) if scorer is not None else None,
        model_fingerprint=fingerprint,
        nulls=null_refs(session, audit, pids, fingerprint),
    )
    audit.provenance = block
    return block


def record_finished(session: Session, audit_id: str, scorer: Scorer | None, settings: Settings) -> None:
    """The run ended with a final status (the caller holds the lease's release in this transaction)."""
    audit = session.get(Audit, audit_id)
    results = subjects.results_for_audit(session, audit_id, with_candidates=False)  # none for other kinds
    block = record_provenance(session, audit, results, scorer, settings)
    properties = {
        r.property_id: {
            "facts": len(r.fact_ids or []),
            "templates": r.n_templates,
            "share": r.share,
            "strict": r.strict,
            "lenient": r.lenient,
            "z_star": r.z_star,
        }
        for r in results
    }
    body = {
        "audit": {"kind": audit.kind, "model": audit.model, "status": audit.status, "batch_id": audit.batch_id},
        "started_at": audit.started_at.isoformat() if audit.started_at else None,
        "finished_at": audit.finished_at.isoformat() if audit.finished_at else None,
        "provenance": block,
        "properties": properties,
        "verdicts": {
            "properties": len(properties),
            "retrieved_by_some_template": sum(p["lenient"] for p in properties.values()),
            "retrieved_by_every_template": sum(p["strict"] for p in properties.values()),
        },
    }
    evidence.append(
        session,
        settings,
        EntryKind.AUDIT_FINISHED,
        principal=f"key:{audit.owner_key_id}" if audit.owner_key_id is not None else "service",  # nulls: "service"
        body=body,
        subject_id=audit.subject_id,
        audit_id=audit_id,
    )
