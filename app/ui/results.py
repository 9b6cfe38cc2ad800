"""What each audit kind's page shows, read through that kind's own service (the JSON API's): the subject audit's
property × template grid, coverage by popularity bucket, the capacity curves, the dynamics trajectories. Every
chart on the pages is drawn from a table of these numbers, so the numbers are always there to read."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.capacity import series as capacity_series
from app.capacity import service as capacity
from app.capacity.schemas import CapacityAuditOptions
from app.coverage import service as coverage
from app.db.models import Audit
from app.dynamics import service as dynamics
from app.privacy import access_log
from app.subjects import service as subjects

FACTS_PER_PAGE = 10  # a huge audit (many facts) pages its grid
CANDIDATES_PER_PAGE = 50
RECORDS_SHOWN = 20
STRINGS_SHOWN = 5


def _subject(session: Session, principal: Principal, audit: Audit, page: int) -> dict[str, Any]:
    facts = subjects.read_facts(session, principal, audit.id, "summary")
    access_log.record(session, principal, "read_facts", subject_id=facts.subject_id, audit_id=audit.id)
    indexed = list(enumerate(facts.facts))
    pages = max(1, -(-len(indexed) // FACTS_PER_PAGE))
    shown = indexed[(page - 1) * FACTS_PER_PAGE : page * FACTS_PER_PAGE]
    templates = sorted({c.template_index for _, f in shown for c in f.canaries})
    grid = [(i, f, {c.template_index: c for c in f.canaries}) for i, f in shown]
    memorized = sum(f.lenient for f in facts.facts)
    return {
        "kind": "subject",
        "grid": grid,
        "templates": templates,
        "page": page,
        "pages": pages,
        "n_facts": len(facts.facts),
        "memorized": memorized,
        "calibration": facts.calibration,
    }


def _coverage(session: Session, principal: Principal, audit: Audit, page: int) -> dict[str, Any]:
    summary = audit.summary or {}
    records = coverage.records_with_prompts(session, audit, RECORDS_SHOWN)  # the reproduced, with their prompts
    return {
        "kind": "coverage",
        "summary": summary,
        "buckets": summary.get("buckets", []),
        "records": records,
        "dataset_id": summary.get("dataset_id"),
    }


def _capacity(session: Session, principal: Principal, audit: Audit, page: int) -> dict[str, Any]:
    if CapacityAuditOptions.model_validate(audit.options).mode == "text":
        return {"kind": "capacity_text", "texts": capacity.text_results(session, audit, 50)}
    series = capacity_series.series(session, audit)
    return {"kind": "capacity", "series": series, "summary": audit.summary or {}}


def _dynamics(session: Session, principal: Principal, audit: Audit, page: int) -> dict[str, Any]:
    _, link = dynamics.dynamics_audit(session, principal, audit.id)
    return {"kind": "dynamics", "series": dynamics.series(session, audit, link, None, STRINGS_SHOWN, None, None)}


PAGES = {"subject": _subject, "coverage": _coverage, "capacity": _capacity, "dynamics": _dynamics}


def subject_name(session: Session, audit: Audit) -> str | None:
    """The audited person's name (subject audits), shown to whoever may see the audit."""
    subject = subjects.repository.get_subject(session, audit.subject_id) if audit.subject_id else None
    return subject.name if subject else None


def for_audit(session: Session, principal: Principal, audit: Audit, page: int) -> dict[str, Any]:
    """The results of a succeeded audit, for its kind's section of the page ({} for a kind without one)."""
    show = PAGES.get(audit.kind)
    return show(session, principal, audit, page) if show else {}


def candidates(
    session: Session, principal: Principal, audit_id: str, fact: int, template: int, page: int
) -> dict[str, Any]:
    """One template's candidates, best first, paged: why the grid's cell has its rank."""
    canary = subjects.read_canary(session, principal, audit_id, fact, template)
    audit = subjects.visible_audit_of_kind(session, principal, audit_id, "subject")
    access_log.record(session, principal, "read_facts", subject_id=audit.subject_id, audit_id=audit_id)
    ranked = sorted(canary.candidates or [], key=lambda c: c.rank)
    pages = max(1, -(-len(ranked) // CANDIDATES_PER_PAGE))
    shown = ranked[(page - 1) * CANDIDATES_PER_PAGE : page * CANDIDATES_PER_PAGE]
    return {"canary": canary, "candidates": shown, "page": page, "pages": pages, "n": len(ranked)}
