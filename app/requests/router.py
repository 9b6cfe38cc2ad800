"""HTTP endpoints of a person's request, its recipients and deliveries: parse, call the service, map results.
Admins and auditors act; a regulator reads; another principal's request is a 404."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, status
from fastapi.responses import Response

from app.audits.kinds import KindsDep
from app.auth.keys import Principal
from app.db.base import utcnow
from app.deps import REQUEST_READERS, SessionDep, SettingsDep, Submitter, require_roles
from app.requests import read, repository, service
from app.requests.schemas import (
    AuditsIn,
    DeliveryIn,
    DeliveryRead,
    ExtensionIn,
    IdentityIn,
    RecipientCreate,
    RecipientRead,
    RefusalIn,
    RequestCreate,
    RequestPage,
    RequestRead,
    VerificationIn,
)
from app.validation import Page, PageSize

router = APIRouter(tags=["requests"])
Reader = Annotated[Principal, Depends(require_roles(*REQUEST_READERS))]
RequestId = Annotated[str, Path(max_length=32)]


def clock() -> datetime:
    """Now, in UTC: the one clock of deadlines and acts (a test freezes it with FastAPI's dependency_overrides)."""
    return utcnow()


Now = Annotated[datetime, Depends(clock)]


@router.post("/requests", status_code=status.HTTP_201_CREATED, response_model=RequestRead)
def create_request(body: RequestCreate, session: SessionDep, settings: SettingsDep, who: Submitter, now: Now):
    """Record a person's request as received: ``due_at`` is one calendar month after ``received_at``."""
    req = service.create(session, settings, who, body, now)
    return read.request(session, req, now)


@router.get("/requests", response_model=RequestPage)
def list_requests(
    session: SessionDep,
    who: Reader,
    now: Now,
    page: Page = 1,
    page_size: PageSize = 50,
    open_only: Annotated[bool, Query(alias="open", description="only requests neither answered nor refused")] = False,
):
    """The officer's queue: the requests you may see, soonest due first, each with its state and whether overdue."""
    rows, total = repository.page_visible(session, who, open_only, page, page_size)
    return RequestPage(items=read.summaries(session, rows, now), total=total)


@router.get("/requests/{request_id}", response_model=RequestRead)
def get_request(request_id: RequestId, session: SessionDep, who: Reader, now: Now):
    return read.request(session, service.get(session, who, request_id), now)


@router.post("/requests/{request_id}/identity", response_model=RequestRead)
def check_identity(
    request_id: RequestId, body: IdentityIn, session: SessionDep, settings: SettingsDep, who: Submitter, now: Now
):
    """The requester's identity checked: verified (the request can be audited) or failed (refused)."""
    return read.request(session, service.check_identity(session, settings, who, request_id, body.status, now), now)


@router.post("/requests/{request_id}/extension", response_model=RequestRead)
def extend(
    request_id: RequestId, body: ExtensionIn, session: SessionDep, settings: SettingsDep, who: Submitter, now: Now
):
    """The one extension Art. 12(3) allows, given within the first month with a reason: due three months after
    receipt."""
    return read.request(session, service.extend(session, settings, who, request_id, body.reason, now), now)


@router.post("/requests/{request_id}/audits", response_model=RequestRead, status_code=status.HTTP_202_ACCEPTED)
def start_audits(
    request_id: RequestId,
    body: AuditsIn,
    session: SessionDep,
    settings: SettingsDep,
    who: Submitter,
    kinds: KindsDep,
    now: Now,
):
    """One subject audit of the person per model of the request (queued; a model audited already is kept)."""
    req = service.start_audits(session, settings, who, request_id, body.options, kinds)
    session.commit()  # the audits are enqueued by the commit
    return read.request(session, req, now)


@router.post("/requests/{request_id}/deliveries", response_model=DeliveryRead, status_code=status.HTTP_201_CREATED)
def deliver(
    request_id: RequestId, body: DeliveryIn, session: SessionDep, settings: SettingsDep, who: Submitter, now: Now
):
    """Deliver the forget set of the request's audit on ``model`` to a registered recipient (Art. 17, 19): the
    only act recorded, and shown to the person, as "sent". Its file: GET .../deliveries/{id}/file."""
    delivery = service.deliver(session, settings, who, request_id, body, now)
    return read.delivery(session, delivery)


@router.get("/requests/{request_id}/deliveries/{delivery_id}/file")
def delivery_file(
    request_id: RequestId, delivery_id: Annotated[str, Path(max_length=32)], session: SessionDep, who: Reader
) -> Response:
    """The delivered forget set, byte for byte (JSON lines with the end marker; its SHA-256 is the delivery's)."""
    found = service.delivery_file(session, who, request_id, delivery_id)
    disposition = {"Content-Disposition": f'attachment; filename="forget-set-{found.id}.jsonl"'}
    return Response(found.content, media_type="application/x-ndjson", headers=disposition)


@router.post("/requests/{request_id}/verification", response_model=RequestRead)
def verification(
    request_id: RequestId, body: VerificationIn, session: SessionDep, settings: SettingsDep, who: Submitter, now: Now
):
    """Record a succeeded verification audit of the unlearned model on the delivered facts."""
    req = service.record_verification(session, settings, who, request_id, body.audit_id, now)
    return read.request(session, req, now)


@router.post("/requests/{request_id}/answer", response_model=RequestRead)
def answer(request_id: RequestId, session: SessionDep, settings: SettingsDep, who: Submitter, now: Now):
    """The reply was sent to the person (its letter: /ui/requests/{id}/reply)."""
    return read.request(session, service.answer(session, settings, who, request_id, now), now)


@router.post("/requests/{request_id}/refusal", response_model=RequestRead)
def refuse(
    request_id: RequestId, body: RefusalIn, session: SessionDep, settings: SettingsDep, who: Submitter, now: Now
):
    return read.request(session, service.refuse(session, settings, who, request_id, body.reason, now), now)


@router.post("/recipients", response_model=RecipientRead, status_code=status.HTTP_201_CREATED)
def register_recipient(body: RecipientCreate, session: SessionDep, who: Submitter):
    """Register a recipient of forget sets (Art. 19): an unlearning pipeline or a deployment."""
    return RecipientRead.model_validate(service.register_recipient(session, who, body), from_attributes=True)


@router.get("/recipients", response_model=list[RecipientRead])
def list_recipients(session: SessionDep, who: Reader):
    return [RecipientRead.model_validate(r, from_attributes=True) for r in repository.recipients_visible(session, who)]
