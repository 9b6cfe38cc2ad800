"""Who waits for whom: an audit whose job cannot go on until other audits end (a verification for the nulls its
verdicts need) goes back to `queued` with ``summary.waiting_for`` (their ids) and its next job parked
(app.queue: ``Dispatcher.park``). The last job of an awaited audit wakes it when it ends (workers/jobs/common.py);
the waiting job checks once more after parking (the awaited audit may have ended in between), and the reconciler
wakes any waiter whose awaited audits have all ended (a wake lost with a process that died). Nothing polls."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Audit
from app.db.models.audit import ACTIVE_STATUSES, AuditStatus

WAITING_FOR = "waiting_for"


def waiting_summary(awaited: Iterable[str]) -> dict[str, list[str]]:
    """The summary a waiting audit keeps while it is `queued`: the ids it waits for (service-owned nulls: no
    personal data)."""
    return {WAITING_FOR: sorted(set(awaited))}


def ready(session: Session, *, among: Iterable[str] | None = None, awaiting: str | None = None) -> list[str]:
    """Queued audits that wait for others, all of which have ended (or are gone): ``among`` these ids only, or
    only those waiting for ``awaiting``."""
    stmt = select(Audit.id, Audit.summary).where(Audit.status == AuditStatus.QUEUED, Audit.summary.is_not(None))
    if among is not None:
        stmt = stmt.where(Audit.id.in_(list(among)))
    waiting: dict[str, set[str]] = {}
    for audit_id, summary in session.execute(stmt):
        awaited = summary.get(WAITING_FOR) if isinstance(summary, dict) else None
        if awaited and (awaiting is None or awaiting in awaited):
            waiting[audit_id] = set(awaited)
    if not waiting:
        return []
    all_awaited = set().union(*waiting.values())
    active = set(session.scalars(select(Audit.id).where(Audit.id.in_(all_awaited), Audit.status.in_(ACTIVE_STATUSES))))
    return sorted(a for a, awaited in waiting.items() if not awaited & active)
