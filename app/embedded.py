"""Embedded mode (no Redis): after a restart, audits that were queued or running are run again."""

from __future__ import annotations

import logging

from app.audits.kinds import KindRegistry
from app.audits.repository import queued_or_running
from app.db.engine import session_scope
from app.queue import get_dispatcher

log = logging.getLogger("memaudit.embedded")


def resume_pending(kinds: KindRegistry) -> int:
    with session_scope() as s:
        pending = [(a.kind, a.id) for a in queued_or_running(s)]
    for kind, audit_id in pending:
        if kind in kinds:
            get_dispatcher().send(kinds[kind].job, audit_id)
    if pending:
        log.info("resumed %d unfinished audits", len(pending))
    return len(pending)
