"""Queries on null distributions and null facts."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Audit, NullDistribution, NullFact
from app.db.models.audit import AuditStatus
from core.measures.null import FactStat

LATEST_LOOKED_AT = 50  # newest subject audits of a model looked at for the latest fingerprint of a mode


def distributions(session: Session, model: str, key: str) -> list[tuple[NullDistribution, str]]:
    """Every null for (model, key) with its audit's status, newest first."""
    stmt = (
        select(NullDistribution, Audit.status)
        .join(Audit, Audit.id == NullDistribution.audit_id)
        .where(NullDistribution.model == model, NullDistribution.key == key)
        .order_by(NullDistribution.id.desc())
    )
    return [(d, status) for d, status in session.execute(stmt)]


def latest_fingerprint(session: Session, model: str, mode: str = "scoring") -> str | None:
    """The model fingerprint the newest succeeded subject audit of ``model`` in ``mode`` ran on (None before any): a
    generator's fingerprint may differ from the scorer's of the same model (the knowledge-free control's does)."""
    stmt = (
        select(Audit.summary)
        .where(Audit.kind == "subject", Audit.model == model, Audit.status == AuditStatus.SUCCEEDED)
        .order_by(Audit.finished_at.desc().nulls_last(), Audit.id.desc())
        .limit(LATEST_LOOKED_AT)
    )
    for summary in session.scalars(stmt):
        summary = summary or {}
        if summary.get("mode", "scoring") == mode:
            return (summary.get("scoring") or {}).get("fingerprint")
    return None


def of_audit(session: Session, audit_id: str) -> list[NullDistribution]:
    stmt = select(NullDistribution).where(NullDistribution.audit_id == audit_id).order_by(NullDistribution.id)
    return list(session.scalars(stmt))


def fact_stats(session: Session, distribution_id: int, assigned_only: bool) -> list[tuple[int, bool, FactStat]]:
    """(person, assigned, statistics) of the null facts of one distribution, every shape (``FactStat.n_values``,
    ``FactStat.in_pool``); only the people's own values with ``assigned_only``."""
    stmt = (
        select(
            NullFact.person,
            NullFact.assigned,
            NullFact.share,
            NullFact.strict,
            NullFact.lenient,
            NullFact.z_star,
            NullFact.n_templates,
            NullFact.n_z,
            NullFact.statistic,
            NullFact.n_values,
            NullFact.in_pool,
            NullFact.misattribution,
        )
        .where(NullFact.distribution_id == distribution_id)
        .order_by(NullFact.id)
    )
    if assigned_only:
        stmt = stmt.where(NullFact.assigned.is_(True))
    return [(r[0], r[1], FactStat(*r[2:8], r[8], r[9] or 1, r[10] is not False, r[11])) for r in session.execute(stmt)]


def facts(session: Session, distribution_id: int, limit: int) -> list[NullFact]:
    stmt = select(NullFact).where(NullFact.distribution_id == distribution_id).order_by(NullFact.id).limit(limit)
    return list(session.scalars(stmt))
