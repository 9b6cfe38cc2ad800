"""Privacy endpoints: revoke a data-subject token; read the access log (Art. 30)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Response, status
from pydantic import BaseModel

from app.db.models.auth import Role
from app.deps import CurrentPrincipal, SessionDep, SettingsDep
from app.errors import Forbidden
from app.privacy import access_log, tokens
from app.validation import IdFilter, Page, PageSize

router = APIRouter(tags=["privacy"])
LOG_READERS = (Role.ADMIN, Role.REGULATOR)


class AccessLogEntry(BaseModel):
    at: datetime
    principal: str
    role: str
    action: str
    subject_id: int | None
    audit_id: str | None


class AccessLogPage(BaseModel):
    items: list[AccessLogEntry]
    page: int
    page_size: int


@router.delete("/audits/{audit_id}/subject-token", status_code=status.HTTP_204_NO_CONTENT)
def revoke_subject_token(audit_id: str, session: SessionDep, principal: CurrentPrincipal) -> Response:
    """Revoke the data-subject token of a subject audit (admin, or the auditor who submitted it): the token
    answers 401 from then on. Idempotent."""
    tokens.revoke(session, principal, audit_id)
    session.commit()  # revoked before the 204 says so
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/access-log", response_model=AccessLogPage)
def read_access_log(
    session: SessionDep,
    settings: SettingsDep,
    principal: CurrentPrincipal,
    subject_id: IdFilter = None,
    audit_id: str | None = None,
    page: Page = 1,
    page_size: PageSize = 50,
) -> AccessLogPage:
    """Who read, exported, erased or revoked which subject's data, newest first (admin and regulator)."""
    if principal.role not in LOG_READERS:
        raise Forbidden("reading the access log needs the role admin or regulator")
    rows = access_log.page(session, subject_id=subject_id, audit_id=audit_id, page=page, page_size=page_size)
    items = [AccessLogEntry.model_validate(r, from_attributes=True) for r in rows]
    return AccessLogPage(items=items, page=page, page_size=page_size)
