"""Dashboard pages of audits: the paged, filtered list (with live progress), one audit (with its kind's results),
its event stream for the browser, and cancelling. Data come from the same services and repositories as the JSON
API; authorization is theirs (visibility) and the API's role lists."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.audits import polling, repository, service
from app.audits.kinds import KindsDep
from app.db.models.audit import ACTIVE_STATUSES, AuditStatus
from app.deps import SUBMITTERS, SessionDep, require_roles
from app.errors import InvalidInput
from app.ui import results, verdicts
from app.ui.session import check_csrf
from app.ui.verdicts import VERDICT_SCAN, VERDICTS
from app.ui.web import Signed, UiRoute, render, url

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
PAGE_SIZE = 25


def _day(value: date | None, *, end: bool = False) -> datetime | None:
    if value is None or (end and value == date.max):  # to the last day there is: no upper bound
        return None
    return datetime.combine(value + timedelta(days=1) if end else value, time.min)


def _listing(request: Request, session, ui, kinds, filters: dict, page: int) -> dict:
    if filters["kind"] and filters["kind"] not in kinds:
        raise InvalidInput("kind", f"kind must be one of {', '.join(kinds)}")
    if filters["created_from"] and filters["created_to"] and filters["created_to"] < filters["created_from"]:
        raise InvalidInput("created_to", "the end date is before the start date; swap them")
    where = {k: filters[k] for k in ("kind", "model", "status", "subject_id")}
    dates = {"created_from": _day(filters["created_from"]), "created_before": _day(filters["created_to"], end=True)}
    scanned = None
    if filters["verdict"]:  # verdicts are computed, not stored: read the newest finished subject audits, bounded
        if where["kind"] not in (None, "subject") or where["status"] not in (None, AuditStatus.SUCCEEDED):
            found, counts, scanned = [], {}, 0
        else:
            where |= {"kind": "subject", "status": AuditStatus.SUCCEEDED}
            candidates, _ = repository.page(
                session, ui.principal, page=1, page_size=VERDICT_SCAN, filters=where, **dates
            )
            counts = verdicts.counts_for(session, candidates)
            found = [a for a in candidates if counts[a.id].verdict == filters["verdict"]]
            scanned = len(candidates)
        total, rows = len(found), found[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    else:
        rows, total = repository.page(session, ui.principal, page=page, page_size=PAGE_SIZE, filters=where, **dates)
        counts = verdicts.counts_for(session, rows)
    pages = max(1, -(-total // PAGE_SIZE))
    active = any(a.status in ACTIVE_STATUSES for a in rows)
    return {
        "audits": rows,
        "names": results.subject_names(session, rows),
        "counts": counts,
        "total": total,
        "page": page,
        "pages": pages,
        "filters": filters,
        "active": active,
        "kinds": list(kinds),
        "statuses": [s.value for s in AuditStatus],
        "verdicts": VERDICTS,
        "scanned": scanned,
        "scan_limit": VERDICT_SCAN,
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
    verdict: Literal["memorized", "none", "pending"] | None = None,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    rows_only: bool = False,
) -> HTMLResponse:
    filters = {
        "verdict": verdict,
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
    shown = results.for_audit(session, ui.principal, audit, page, kinds)
    session.commit()  # the access log entry of a subject's results is written before the page leaves
    declared = results.kind_page(kinds, audit)
    return render(
        request,
        "audit.html",
        audit=read,
        section=shown[0] if shown else None,
        results=shown[1] if shown else {},
        about=declared.about if declared else "",
        can_act=ui.principal.role in SUBMITTERS,
        subject_name=results.subject_name(session, audit),
        active=audit.status in ACTIVE_STATUSES,
        eta=verdicts.duration(verdicts.eta_seconds(audit)) if audit.status == AuditStatus.RUNNING else None,
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
    account = await run_in_threadpool(polling.check_visible, ui.principal, audit_id)
    events = polling.open_stream(
        ui.principal,
        audit_id,
        request,
        busy="too many event streams are open; reload the page later",
        account=account,
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
