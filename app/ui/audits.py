"""Dashboard pages of audits: the paged, filtered list (with live progress), one audit (with its kind's results),
its event stream for the browser, and cancelling. Data come from the same services and repositories as the JSON
API; authorization is theirs (visibility) and the API's role lists."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Annotated

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.audits import polling, repository, service
from app.audits.kinds import KindsDep
from app.coverage import service as coverage
from app.db.models.audit import ACTIVE_STATUSES, AuditStatus
from app.deps import SUBMITTERS, SessionDep, SettingsDep, require_roles
from app.errors import InvalidInput
from app.privacy import erasure
from app.ui import results
from app.ui.session import check_csrf
from app.ui.web import Signed, UiRoute, render, url

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
PAGE_SIZE = 25


def _day(value: date | None, *, end: bool = False) -> datetime | None:
    if value is None or (end and value == date.max):  # to the last day there is: no upper bound
        return None
    return datetime.combine(value + timedelta(days=1) if end else value, time.min)


def _listing(request: Request, session, ui, kinds, filters: dict, page: int) -> dict:  # noqa: ANN001
    if filters["kind"] and filters["kind"] not in kinds:
        raise InvalidInput("kind", f"kind must be one of {', '.join(kinds)}")
    if filters["created_from"] and filters["created_to"] and filters["created_to"] < filters["created_from"]:
        raise InvalidInput("created_to", "the end date is before the start date; swap them")
    rows, total = repository.page(
        session,
        ui.principal,
        page=page,
        page_size=PAGE_SIZE,
        filters={k: filters[k] for k in ("kind", "model", "status", "subject_id")},
        created_from=_day(filters["created_from"]),
        created_before=_day(filters["created_to"], end=True),
    )
    pages = max(1, -(-total // PAGE_SIZE))
    active = any(a.status in ACTIVE_STATUSES for a in rows)
    return {
        "audits": rows,
        "total": total,
        "page": page,
        "pages": pages,
        "filters": filters,
        "active": active,
        "kinds": list(kinds),
        "statuses": [s.value for s in AuditStatus],
    }


@router.get("/audits", response_class=HTMLResponse)
def list_page(
    request: Request,
    session: SessionDep,
    ui: Signed,
    kinds: KindsDep,
    kind: str | None = None,
    model: Annotated[str | None, Query(max_length=300)] = None,
    status: AuditStatus | None = None,
    subject_id: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
    created_from: date | None = None,
    created_to: date | None = None,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    rows_only: bool = False,
) -> HTMLResponse:
    filters = {
        "kind": kind or None,
        "model": model or None,
        "status": status,
        "subject_id": subject_id,
        "created_from": created_from,
        "created_to": created_to,
    }
    context = _listing(request, session, ui, kinds, filters, page)
    return render(request, "audit_rows.html" if rows_only else "audits.html", **context)


@router.get("/audits/{audit_id}", response_class=HTMLResponse)
def audit_page(
    audit_id: str,
    request: Request,
    session: SessionDep,
    ui: Signed,
    kinds: KindsDep,
    page: Annotated[int, Query(ge=1, le=10_000)] = 1,
) -> HTMLResponse:
    audit = service.get_audit(session, ui.principal, audit_id)
    read = service.to_read(audit, kinds)
    shown = results.for_audit(session, ui.principal, audit, page) if audit.status == AuditStatus.SUCCEEDED else {}
    session.commit()  # the access log entry of a subject's results is written before the page leaves
    can_act = ui.principal.role in SUBMITTERS
    name = results.subject_name(session, audit)
    return render(
        request,
        "audit.html",
        audit=read,
        results=shown,
        can_act=can_act,
        subject_name=name,
        active=audit.status in ACTIVE_STATUSES,
    )


@router.get("/audits/{audit_id}/facts/{fact}/templates/{template}", response_class=HTMLResponse)
def candidates_page(
    audit_id: str,
    fact: Annotated[int, Path(ge=0, le=10_000)],
    template: Annotated[int, Path(ge=0, le=10_000)],
    request: Request,
    session: SessionDep,
    ui: Signed,
    page: Annotated[int, Query(ge=1, le=10_000)] = 1,
) -> HTMLResponse:
    context = results.candidates(session, ui.principal, audit_id, fact, template, page)
    session.commit()
    return render(request, "candidates.html", audit_id=audit_id, fact=fact, **context)


@router.get("/audits/{audit_id}/events")
async def audit_events(audit_id: str, request: Request, ui: Signed) -> StreamingResponse:
    """The same stream as GET /audits/{id}/events, for the signed-in browser (EventSource sends the cookie)."""
    await run_in_threadpool(polling.check_visible, ui.principal, audit_id)
    events = polling.open_stream(
        ui.principal, audit_id, request, busy="too many event streams are open; reload the page later"
    )
    return StreamingResponse(events, media_type="text/event-stream", headers=polling.SSE_HEADERS)


@router.post("/audits/{audit_id}/cancel")
def cancel(
    audit_id: str, session: SessionDep, ui: Signed, csrf: Annotated[str | None, Form(max_length=200)] = None
) -> RedirectResponse:
    check_csrf(ui, csrf)
    require_roles(*SUBMITTERS)(ui.principal)
    service.cancel_audit(session, ui.principal, audit_id)
    session.commit()
    return RedirectResponse(url(f"/audits/{audit_id}"), status_code=303)


@router.post("/subjects/{subject_id}/erase")
def erase_subject(
    subject_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    session: SessionDep,
    settings: SettingsDep,
    ui: Signed,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> RedirectResponse:
    """As DELETE /subjects/{id}: the subject, its facts, audits and results, and the cached sentences naming them."""
    check_csrf(ui, csrf)
    require_roles(*SUBMITTERS)(ui.principal)
    erasure.erase(session, settings, ui.principal, subject_id)
    return RedirectResponse(url("/audits"), status_code=303)


@router.post("/datasets/{dataset_id}/delete")
def delete_dataset(
    dataset_id: Annotated[str, Path(max_length=64)],
    session: SessionDep,
    ui: Signed,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> RedirectResponse:
    """As DELETE /datasets/{id}: the dataset, its records and the coverage outcomes quoting them."""
    check_csrf(ui, csrf)
    require_roles(*SUBMITTERS)(ui.principal)
    coverage.delete(session, ui.principal, dataset_id)
    session.commit()
    return RedirectResponse(url("/audits"), status_code=303)
