"""The officer's queue of requests (due and overdue) and a request's reply letter to the person, as a page and as
a standalone HTML file to send (app/requests/letter.py builds it from the stored verdicts)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import HTMLResponse

from app.deps import SessionDep
from app.errors import Forbidden
from app.requests import letter, repository, service
from app.requests.read import summaries
from app.requests.router import Now
from app.ui.web import Signed, UiRoute, render

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
READERS = ("admin", "auditor", "regulator")


def _officer(ui: Signed) -> Signed:
    if ui.principal.role not in READERS:
        raise Forbidden(f"this needs the role {' or '.join(READERS)} (you are {ui.principal.role})")
    return ui


Officer = Annotated[Signed, Depends(_officer)]


@router.get("/requests", response_class=HTMLResponse)
def queue_page(request: Request, session: SessionDep, ui: Officer, now: Now) -> HTMLResponse:
    rows, total = repository.page_visible(session, ui.principal, open_only=False, page=1, page_size=200)
    return render(request, "requests.html", rows=summaries(session, rows, now), total=total, now=now)


def _letter(session, ui, request_id: str):  # noqa: ANN001, ANN202
    req = service.get(session, ui.principal, request_id)
    built = letter.build(session, ui.principal, req)
    session.commit()  # the access log's entry is written before the page leaves
    return req, built


@router.get("/requests/{request_id}/reply", response_class=HTMLResponse)
def reply_page(
    request_id: Annotated[str, Path(max_length=32)], request: Request, session: SessionDep, ui: Officer
) -> HTMLResponse:
    req, built = _letter(session, ui, request_id)
    return render(request, "request_reply.html", letter=built, req=req, standalone=False)


@router.get("/requests/{request_id}/reply.html", response_class=HTMLResponse)
def reply_file(
    request_id: Annotated[str, Path(max_length=32)], request: Request, session: SessionDep, ui: Officer
) -> HTMLResponse:
    """The same letter as one HTML file with nothing of the dashboard, to attach to the answer."""
    req, built = _letter(session, ui, request_id)
    page = render(request, "request_letter.html", letter=built, req=req, standalone=True)
    page.headers["Content-Disposition"] = f'attachment; filename="reply-{req.id}.html"'
    return page
