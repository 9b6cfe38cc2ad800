"""Revocation of data-subject tokens. A token is derived from its audit id and the pepper (nothing is stored
when it is issued), so revoking one records the audit id; authentication refuses tokens of revoked audits."""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.orm import Session

from app.audits.repository import get_visible
from app.auth.keys import Principal
from app.db.models import DashboardSession, RevokedSubjectToken
from app.db.models.auth import Role
from app.errors import Forbidden, NotFound
from app.privacy import access_log

REVOKERS = (Role.ADMIN, Role.AUDITOR)


def revoke(session: Session, principal: Principal, audit_id: str) -> None:
    """Idempotent: revoking a revoked token again changes nothing (and still answers 204)."""
    audit = get_visible(session, principal, audit_id)
    if audit is None:
        raise NotFound("no audit with this id (among those you may see)")
    if principal.role not in REVOKERS:
        raise Forbidden("revoking a data-subject token needs the role admin or the auditor who submitted the audit")
    if audit.subject_id is None:  # only an audit about one data subject hands out a token
        raise NotFound(f"this {audit.kind} audit has no data-subject token; only subject audits have one")
    if session.get(RevokedSubjectToken, audit_id) is None:
        session.add(RevokedSubjectToken(audit_id=audit_id, revoked_by=principal.id[:64]))
    # the token's dashboard sessions end with it (each request checks the revocation too)
    session.execute(delete(DashboardSession).where(DashboardSession.principal == f"subject:{audit_id}"))
    access_log.record(session, principal, "revoke_token", subject_id=audit.subject_id, audit_id=audit_id)


def is_revoked(session: Session, audit_id: str) -> bool:
    return session.get(RevokedSubjectToken, audit_id) is not None
