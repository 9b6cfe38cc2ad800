"""The subject audit's section of the dashboard page: the default policy's verdict and p-value first, then the
rank of the truth per template (the grid), and the other statistics (lenient, strict, z̄*) with their rates on
the null beside them. A verdict whose null is still running names that null, its progress and an ETA."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from app.audits import repository as audits
from app.auth.keys import Principal
from app.db.models import Audit, Subject
from app.privacy import access_log
from app.subjects import detection, service
from app.subjects.schemas import FactResultRead
from core.catalog import load_catalog, split_template

FACTS_PER_PAGE = 10  # a huge audit (many facts) pages its grid


def _null(session: Session, principal: Principal, audit_id: str | None, now: datetime) -> dict[str, Any] | None:
    """A null audit's progress for a pending verdict; ``visible`` says whether this principal may open its page."""
    row = session.get(Audit, audit_id) if audit_id else None
    if row is None:
        return None
    eta = None
    if row.started_at is not None and row.progress_done and row.progress_total:
        started = row.started_at if row.started_at.tzinfo else row.started_at.replace(tzinfo=UTC)
        elapsed = (now - started).total_seconds()
        eta = max(0.0, elapsed / row.progress_done * max(0, row.progress_total - row.progress_done))
    visible = audits.get_visible(session, principal, row.id) is not None
    return {
        "id": row.id,
        "status": row.status,
        "done": row.progress_done,
        "total": row.progress_total,
        "eta_seconds": eta,
        "visible": visible,
    }


def build(session: Session, principal: Principal, audit: Audit, page: int) -> dict[str, Any]:
    facts = service.read_facts(session, principal, audit.id, "summary")
    access_log.record(session, principal, "read_facts", subject_id=facts.subject_id, audit_id=audit.id)
    indexed = list(enumerate(facts.facts))
    pages = max(1, -(-len(indexed) // FACTS_PER_PAGE))
    shown = indexed[(page - 1) * FACTS_PER_PAGE : page * FACTS_PER_PAGE]
    templates = sorted({c.template_index for _, f in shown for c in f.canaries})
    grid = [(i, f, {c.template_index: c for c in f.canaries}) for i, f in shown]
    now, nulls = datetime.now(UTC), {}
    for _, f, _ in grid:
        null_id = getattr(f.calibration, "null_audit_id", None)
        if null_id and null_id not in nulls:
            nulls[null_id] = _null(session, principal, null_id, now)
    verdicts = [getattr(f.calibration, "memorized", None) for f in facts.facts]
    return {
        "grid": grid,
        "templates": templates,
        "page": page,
        "pages": pages,
        "n_facts": len(facts.facts),
        "memorized": sum(v is True for v in verdicts),
        "undecided": sum(not isinstance(v, bool) for v in verdicts),
        "calibration": facts.calibration,
        "nulls": nulls,
        "misattributions": misattributions(session.get(Subject, audit.subject_id), facts.facts),
        "misses": detection.miss_line(audit.model, [f.property for f in facts.facts]),
        "name_inference": detection.NAME_INFERENCE,
    }


def misattributions(subject: Subject | None, facts: list[FactResultRead]) -> list[dict[str, Any]]:
    """The facts for which the model prefers a specific false value beyond chance, each with one example sentence
    (the baseline template with the person's name and that value: what the model finds likely, or in mode generation
    what it says) and, asked, the share of its answers that named the value."""
    out = []
    catalog = load_catalog()
    for f in facts:
        m = f.misattribution
        if m is None or not m.misattributed or m.value is None:
            continue
        base = next((c.template for c in f.canaries if c.kind == "baseline"), None)
        if base is None and f.mode == "generation" and f.property in catalog:
            base = catalog.get(f.property).baseline
        example = "".join(split_template(base, subject.name, m.value)) if base and subject else None
        out.append(
            {
                "label": f.label,
                "value": m.value,
                "truths": f.values,
                "p_value": m.p_value,
                "example": example,
                "special_category": f.special_category,
                "mode": f.mode,
                "said_share": m.statistic if f.mode == "generation" else None,
                "namesake": bool(m.namesake),
            }
        )
    return out
