"""Erasing from the dashboard, in two steps and post/redirect/get: a GET page names what will be deleted and asks;
its form POSTs (CSRF-checked) the same erasure as the API (DELETE /subjects/{id}, DELETE /datasets/{id}); the POST
redirects to a page reporting the counts, so a refresh repeats nothing.

The counts travel in the redirect's query with an HMAC under the session's CSRF token: a link made by anyone else
(or for another session) is not shown as a report of this session's erasure."""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.coverage import repository as datasets
from app.coverage import service as coverage
from app.deps import SUBMITTERS, SessionDep, SettingsDep, require_roles
from app.errors import NotFound
from app.subjects import erasure
from app.subjects import repository as subjects
from app.ui.session import UiSession, check_csrf
from app.ui.web import Signed, UiRoute, render, url

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
SubjectId = Annotated[int, Path(ge=1, le=2**63 - 1)]
DatasetId = Annotated[str, Path(max_length=64)]
COUNTED = ("facts", "audits", "cached_sentences", "idempotency_keys", "job_records", "records")


def _signature(ui: UiSession, what: str, counts: dict[str, int]) -> str:
    text = what + "|" + "|".join(f"{k}={counts.get(k)}" for k in COUNTED)
    return hmac.new(ui.csrf.encode(), text.encode(), hashlib.sha256).hexdigest()[:32]


def _erasable_subject(session: Session, principal: Principal, subject_id: int):
    """The subject, as DELETE /subjects/{id} would find it (404 for another key's subject)."""
    require_roles(*SUBMITTERS)(principal)
    subject = subjects.get_subject(session, subject_id)
    if subject is None or (principal.role == "auditor" and subject.owner_key_id != principal.key_id):
        raise NotFound("no subject with this id (among those you may erase)")
    return subject


@router.get("/subjects/{subject_id}/erase", response_class=HTMLResponse)
def confirm_erase_subject(subject_id: SubjectId, request: Request, session: SessionDep, ui: Signed) -> HTMLResponse:
    subject = _erasable_subject(session, ui.principal, subject_id)
    audits = sorted(subjects.audits_of_subject(session, subject_id), key=lambda a: a.created_at)
    properties = sorted({f.property_id for f in subject.facts})
    return render(
        request,
        "erase_confirm.html",
        what="subject",
        action=url(f"/subjects/{subject_id}/erase"),
        name=subject.name,
        subject_id=subject_id,
        n_facts=len(subject.facts),
        properties=properties,
        audits=audits,
    )


@router.post("/subjects/{subject_id}/erase")
def erase_subject(
    subject_id: SubjectId,
    session: SessionDep,
    settings: SettingsDep,
    ui: Signed,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> RedirectResponse:
    """As DELETE /subjects/{id}: the subject, its facts, audits and results, and the cached sentences naming them."""
    check_csrf(ui, csrf)
    require_roles(*SUBMITTERS)(ui.principal)
    counts = erasure.erase(session, settings, ui.principal, subject_id)
    counts = {k: int(counts.get(k, 0)) for k in COUNTED if k in counts}
    sig = _signature(ui, f"subject:{subject_id}", counts)
    return RedirectResponse(url("/erased", what="subject", id=subject_id, sig=sig, **counts), status_code=303)


@router.get("/datasets/{dataset_id}/delete", response_class=HTMLResponse)
def confirm_delete_dataset(dataset_id: DatasetId, request: Request, session: SessionDep, ui: Signed) -> HTMLResponse:
    require_roles(*SUBMITTERS)(ui.principal)
    dataset = coverage.get_dataset(session, ui.principal, dataset_id)
    files = datasets.files_of(session, [dataset.id])[dataset.id]
    return render(
        request,
        "erase_confirm.html",
        what="dataset",
        action=url(f"/datasets/{dataset_id}/delete"),
        name=dataset.name,
        dataset_id=dataset.id,
        files=[(f.target, getattr(f, "rows", None)) for f in files],
    )


@router.post("/datasets/{dataset_id}/delete")
def delete_dataset(
    dataset_id: DatasetId,
    session: SessionDep,
    ui: Signed,
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> RedirectResponse:
    """As DELETE /datasets/{id}: the dataset, its records and the coverage outcomes quoting them."""
    check_csrf(ui, csrf)
    require_roles(*SUBMITTERS)(ui.principal)
    records = coverage.delete(session, ui.principal, dataset_id)
    session.commit()
    counts = {"records": int(records or 0)}
    sig = _signature(ui, f"dataset:{dataset_id}", counts)
    return RedirectResponse(url("/erased", what="dataset", id=dataset_id, sig=sig, **counts), status_code=303)


@router.get("/erased", response_class=HTMLResponse)
def erased(
    request: Request,
    ui: Signed,
    what: Annotated[str, Query(pattern="^(subject|dataset)$")],
    id: Annotated[str, Query(max_length=64)],
    sig: Annotated[str, Query(max_length=64)] = "",
    facts: Annotated[int | None, Query(ge=0)] = None,
    audits: Annotated[int | None, Query(ge=0)] = None,
    cached_sentences: Annotated[int | None, Query(ge=0)] = None,
    idempotency_keys: Annotated[int | None, Query(ge=0)] = None,
    job_records: Annotated[int | None, Query(ge=0)] = None,
    records: Annotated[int | None, Query(ge=0)] = None,
) -> HTMLResponse:
    """The report of an erasure this session made (a GET: reading it again repeats nothing)."""
    given = {
        "facts": facts,
        "audits": audits,
        "cached_sentences": cached_sentences,
        "idempotency_keys": idempotency_keys,
        "job_records": job_records,
        "records": records,
    }
    counts = {k: v for k, v in given.items() if v is not None}
    genuine = hmac.compare_digest(sig.encode(), _signature(ui, f"{what}:{id}", counts).encode())
    return render(request, "erased.html", what=what, id=id, counts=counts if genuine else {}, genuine=genuine)
