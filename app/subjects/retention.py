"""Retention (``retention_days``): finished audits older than N days are purged with everything derived from
them — a subject audit by erasing its subject (app/subjects/erasure.py: facts, results, cached scores,
idempotency keys, job records), any other audit by deleting it (its results cascade). Run by the reconciler's
maintenance pass; bounded per pass. Subjects imported from a Wikidata dump (public reference data, not tied to
an audit) are not purged: re-import or delete the dump to drop them."""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import delete, select

from app.auth.keys import Principal
from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import Audit
from app.db.models.audit import FINAL_STATUSES
from app.db.models.auth import Role
from app.errors import NotFound
from app.queue import Dispatcher
from app.settings import Settings
from app.subjects import erasure

log = logging.getLogger("memaudit.retention")
RETENTION = Principal(id="retention", role=Role.ADMIN)
BATCH = 200


def purge(settings: Settings, dispatcher: Dispatcher) -> dict[str, int]:
    if settings.retention_days is None:
        return {"subjects": 0, "audits": 0}
    cutoff = utcnow() - timedelta(days=settings.retention_days)
    with session_scope() as s:
        stmt = (
            select(Audit.id, Audit.subject_id)
            .where(Audit.status.in_(FINAL_STATUSES), Audit.created_at < cutoff)
            .order_by(Audit.created_at)
            .limit(BATCH)
        )
        rows = [tuple(r) for r in s.execute(stmt)]
    erased = deleted = 0
    for audit_id, subject_id in rows:
        with session_scope() as s:
            if subject_id is None:
                deleted += s.execute(delete(Audit).where(Audit.id == audit_id)).rowcount or 0
                continue
            try:
                erasure.erase(s, settings, RETENTION, subject_id, vacuum_after=False)
                erased += 1
            except NotFound:  # another worker's pass was first
                continue
    if deleted:
        dispatcher.discard([a for a, subject in rows if subject is None])
    if erased or deleted:
        erasure.vacuum(settings)
        log.info(
            "retention (%d days): erased %d subjects with their audits, deleted %d other audits",
            settings.retention_days,
            erased,
            deleted,
        )
    return {"subjects": erased, "audits": deleted}
