"""The access log (GDPR Art. 30 record of processing): who read, exported, erased or revoked which subject's
data, and when. It names principals, subjects and audits by id only, never a name or a fact."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.engine import session_scope
from app.db.models import AccessLog

FLUSH_EVERY = 200  # distinct (subject, audit) pairs of an export written per transaction


def record(
    session: Session, principal: Principal, action: str, *, subject_id: int | None = None, audit_id: str | None = None
) -> None:
    session.add(
        AccessLog(
            principal=principal.id[:64], role=principal.role, action=action, subject_id=subject_id, audit_id=audit_id
        )
    )


def logged_export(rows: Iterator[dict[str, Any]], principal: Principal, action: str) -> Iterator[dict[str, Any]]:
    """Pass exported records through, logging each (subject, audit) they disclose once. Written in batches in
    its own sessions (a stream outlives its request), and finally when the stream ends or the client leaves."""
    seen: set[tuple[int, str]] = set()
    pending: list[tuple[int, str]] = []

    def flush() -> None:
        if pending:
            with session_scope() as s:
                for subject_id, audit_id in pending:
                    record(s, principal, action, subject_id=subject_id, audit_id=audit_id)
            pending.clear()

    try:
        for row in rows:
            pair = (row["subject_id"], row["audit_id"])
            if pair not in seen:
                seen.add(pair)
                pending.append(pair)
                if len(pending) >= FLUSH_EVERY:
                    flush()
            yield row
    finally:
        flush()


def page(
    session: Session, *, subject_id: int | None, audit_id: str | None, page: int, page_size: int
) -> list[AccessLog]:
    stmt = select(AccessLog)
    if subject_id is not None:
        stmt = stmt.where(AccessLog.subject_id == subject_id)
    if audit_id is not None:
        stmt = stmt.where(AccessLog.audit_id == audit_id)
    stmt = stmt.order_by(AccessLog.id.desc()).offset((page - 1) * page_size).limit(page_size)
    return list(session.scalars(stmt))
