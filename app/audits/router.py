"""HTTP endpoints for audits: parse, call the service, map results. No queries here."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Header, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.audits import polling, repository, service
from app.audits.body import ThreadParsedRoute
from app.audits.kinds import KindRegistry, KindsDep
from app.audits.schemas import AuditCreated, AuditPage, AuditRead
from app.db.models.audit import AuditStatus
from app.deps import CurrentPrincipal, SessionDep, SettingsDep, Submitter
from app.errors import InvalidInput
from app.validation import IdFilter, Page, PageSize

router = APIRouter(prefix="/audits", tags=["audits"])


def submit_router(kinds: KindRegistry) -> APIRouter:
    """POST /audits. Its body is the union of the registered kinds' schemas, so it is built with the registry."""

    def create_audit(
        body,  # the union of the kinds' create schemas: annotated below, once the registry is known
        session: SessionDep,
        settings: SettingsDep,
        principal: Submitter,
        response: Response,
        idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", min_length=1, max_length=200)] = None,
    ) -> AuditCreated:
        """Submit an audit. The same Idempotency-Key with the same body returns the same audit."""
        audit, replayed = service.create_audit(session, settings, principal, body, idempotency_key, kinds)
        session.commit()  # the 202 acknowledges only what is durable: committed, and enqueued by the commit's hook
        response.headers["Location"] = f"/audits/{audit.id}"
        if replayed:
            response.headers["Idempotent-Replayed"] = "true"
        return service.to_created(audit, settings, kinds)

    create_audit.__annotations__["body"] = Annotated[kinds.create_type(), Body()]
    submit = APIRouter(prefix="/audits", tags=["audits"], route_class=ThreadParsedRoute)
    submit.add_api_route(
        "", create_audit, methods=["POST"], status_code=status.HTTP_202_ACCEPTED, response_model=AuditCreated
    )
    return submit


@router.get("", response_model=AuditPage)
def list_audits(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: CurrentPrincipal,
    kinds: KindsDep,
    model: str | None = None,
    kind: Annotated[str | None, Query(description="an audit kind (the `kind` of POST /audits)")] = None,
    status_: Annotated[AuditStatus | None, Query(alias="status")] = None,
    subject_id: IdFilter = None,
    page: Page = 1,
    page_size: PageSize = 50,
) -> AuditPage:
    if kind is not None and kind not in kinds:
        raise InvalidInput("kind", f"kind must be one of {', '.join(kinds)}")
    filters = {"model": model, "kind": kind, "status": status_, "subject_id": subject_id}
    rows, total = repository.page(session, principal, filters=filters, page=page, page_size=page_size)
    body = AuditPage(items=[service.to_read(a, kinds) for a in rows], page=page, page_size=page_size, total=total)
    return _conditional(request, response, body)


@router.get("/{audit_id}", response_model=AuditRead)
def get_audit(
    audit_id: str,
    request: Request,
    response: Response,
    session: SessionDep,
    principal: CurrentPrincipal,
    kinds: KindsDep,
) -> AuditRead:
    """The audit. Poll with `If-None-Match: <the last ETag>`: 304 while nothing changed (or use `/events`)."""
    return _conditional(request, response, service.to_read(service.get_audit(session, principal, audit_id), kinds))


def _conditional(request: Request, response: Response, body):  # the body or a 304
    etag = polling.etag_of(body)
    polling.tagged(response, etag)
    return polling.not_modified(request, etag) or body


@router.get("/{audit_id}/events", response_class=StreamingResponse)
async def audit_events(audit_id: str, request: Request, principal: CurrentPrincipal) -> StreamingResponse:
    """Server-Sent Events (`text/event-stream`): `progress` events with status and progress as they change, then
    `end` at a final status (`timeout` after a few minutes: reconnect). Same visibility as GET /audits/{id}."""
    account = await run_in_threadpool(polling.check_visible, principal, audit_id)  # 404 before the stream starts
    events = polling.open_stream(
        principal,
        audit_id,
        request,
        busy="too many event streams are open; poll GET /audits/{id} with If-None-Match",
        account=account,
    )
    return StreamingResponse(events, media_type="text/event-stream", headers=polling.SSE_HEADERS)


@router.delete("/{audit_id}", response_model=AuditRead)
def cancel_audit(audit_id: str, session: SessionDep, principal: Submitter, kinds: KindsDep) -> AuditRead:
    """Cancel a queued or running audit (a running job stops at its next progress report)."""
    audit = service.cancel_audit(session, principal, audit_id)
    session.commit()  # cancelled before the answer says so
    return service.to_read(audit, kinds)
