"""HTTP endpoints for audits: parse, call the service, map results. No queries here."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Header, Query, Response, status

from app.audits import repository, service
from app.audits.kinds import audit_create_type
from app.audits.schemas import AuditCreated, AuditPage, AuditRead
from app.deps import CurrentPrincipal, SessionDep, SettingsDep
from app.errors import InvalidInput
from app.subjects import service as subjects
from app.subjects.schemas import Detail, FactsPage

router = APIRouter(prefix="/audits", tags=["audits"])
AuditCreate = audit_create_type()
Status = Literal["queued", "running", "succeeded", "failed", "cancelled"]


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=AuditCreated)
def create_audit(
    body: Annotated[AuditCreate, Body()],
    session: SessionDep,
    settings: SettingsDep,
    principal: CurrentPrincipal,
    response: Response,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> AuditCreated:
    """Submit an audit. The same Idempotency-Key with the same body returns the same audit."""
    audit, replayed = service.create_audit(session, settings, principal, body, idempotency_key)
    response.headers["Location"] = f"/audits/{audit.id}"
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return service.to_created(audit, settings)


@router.get("", response_model=AuditPage)
def list_audits(
    session: SessionDep,
    settings: SettingsDep,
    principal: CurrentPrincipal,
    model: str | None = None,
    kind: Literal["subject", "coverage", "capacity", "dynamics", "null"] | None = None,
    status_: Annotated[Status | None, Query(alias="status")] = None,
    subject_id: int | None = None,
    page: Annotated[int, Query(ge=1)] = 1,
    page_size: Annotated[int, Query(ge=1)] = 50,
) -> AuditPage:
    if page_size > settings.max_page_size:
        raise InvalidInput("page_size", f"page_size must be between 1 and {settings.max_page_size}")
    filters = {"model": model, "kind": kind, "status": status_, "subject_id": subject_id}
    rows, total = repository.page(session, principal, filters=filters, page=page, page_size=page_size)
    return AuditPage(items=[service.to_read(a) for a in rows], page=page, page_size=page_size, total=total)


@router.get("/{audit_id}", response_model=AuditRead)
def get_audit(audit_id: str, session: SessionDep, principal: CurrentPrincipal) -> AuditRead:
    return service.to_read(service.get_audit(session, principal, audit_id))


@router.delete("/{audit_id}", response_model=AuditRead)
def cancel_audit(audit_id: str, session: SessionDep, principal: CurrentPrincipal) -> AuditRead:
    """Cancel a queued or running audit (a running job stops at its next progress report)."""
    return service.to_read(service.cancel_audit(session, principal, audit_id))


@router.get("/{audit_id}/facts", response_model=FactsPage)
def get_facts(
    audit_id: str, session: SessionDep, principal: CurrentPrincipal, detail: Detail = "summary"
) -> FactsPage:
    """Per fact: rank per template, share of templates at rank 1, strict/lenient, z*. With
    `detail=candidates`, every candidate's sentences, NLLs and score, so the ranking can be recomputed."""
    return subjects.read_facts(session, principal, audit_id, detail)
