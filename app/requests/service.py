"""A person's request: intake, the deadline, the state, and the acts on it (identity, extension, audits, delivery,
verification, answer, refusal). Each act appends one evidence entry (ids, dates, counts and hashes: no name, no
fact, no free text). Roles are the router's; visibility is the repository's (another principal's request is a 404).

**The deadline** (Art. 12(3)): ``due_at`` is ``received_at`` plus one calendar month, at the same time of day: the
same day of the next month, or that month's last day where it has no such day (31 January -> 28 or 29 February).
One extension, with a stated reason and given before ``due_at``, moves it to ``received_at`` plus three calendar
months (the same rule). A request is overdue from ``due_at`` on (``now >= due_at``) until it is answered or refused.

**The state** is read from what was done, never stored apart from it (a read writes nothing): refused, answered,
verified (a verification recorded), delivered (a forget set delivered), audited (every audit succeeded),
identity_checked, received."""

from __future__ import annotations

import calendar
import hashlib
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from app.audits import service as audits
from app.audits.kinds import KindRegistry
from app.auth.keys import Principal
from app.db.models import Audit
from app.db.models.audit import AuditStatus
from app.db.models.requests import Delivery, PersonRequest, Recipient, RequestAudit
from app.db.vocabulary import IdentityCheck, RequestState, Right
from app.errors import Conflict, InvalidInput, NotFound
from app.evidence import repository as evidence
from app.evidence.schemas import EntryKind
from app.privacy import access_log
from app.requests import repository
from app.requests.delivery import forget_set_file
from app.requests.schemas import DeliveryIn, RecipientCreate, RequestCreate
from app.settings import Settings
from app.subjects.schemas import SubjectAuditCreate, SubjectAuditOptions, SubjectIn

NOT_FOUND = "no such request (or not yours)"
EXTENSION_MONTHS = 2


def add_months(at: datetime, months: int) -> datetime:
    """``at`` plus ``months`` calendar months: the same day and time, or the month's last day where it has none."""
    year, index = divmod(at.month - 1 + months, 12)
    year, month = at.year + year, index + 1
    return at.replace(year=year, month=month, day=min(at.day, calendar.monthrange(year, month)[1]))


def utc(at: datetime) -> datetime:
    """A stored time as UTC (SQLite returns it without its zone; every time here is stored in UTC)."""
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def due(received_at: datetime, extended: bool) -> datetime:
    return add_months(utc(received_at), 1 + (EXTENSION_MONTHS if extended else 0))


def is_open(req: PersonRequest) -> bool:
    return req.answered_at is None and req.refused_at is None


def overdue(req: PersonRequest, now: datetime) -> bool:
    return is_open(req) and now >= utc(req.due_at)


def days_left(req: PersonRequest, now: datetime) -> int:
    return (utc(req.due_at) - now) // timedelta(days=1)


def state(req: PersonRequest, audit_statuses: list[str | None], delivered: bool) -> RequestState:
    if req.refused_at is not None:
        return RequestState.REFUSED
    if req.answered_at is not None:
        return RequestState.ANSWERED
    if req.verified_at is not None:
        return RequestState.VERIFIED
    if delivered:
        return RequestState.DELIVERED
    if audit_statuses and all(s == AuditStatus.SUCCEEDED for s in audit_statuses):
        return RequestState.AUDITED
    if req.identity_check == IdentityCheck.VERIFIED:
        return RequestState.IDENTITY_CHECKED
    return RequestState.RECEIVED


def _record(
    session: Session,
    settings: Settings,
    principal: Principal,
    kind: EntryKind,
    req: PersonRequest,
    body: dict,
    **about: object,
) -> None:
    evidence.append(session, settings, kind, principal=principal.id, body={"request": req.id, **body}, **about)


def get(session: Session, principal: Principal, request_id: str) -> PersonRequest:
    req = repository.get_visible(session, principal, request_id)
    if req is None:
        raise NotFound(NOT_FOUND)
    return req


def _open(session: Session, principal: Principal, request_id: str) -> PersonRequest:
    req = get(session, principal, request_id)
    if not is_open(req):
        raise Conflict("this request is answered or refused: nothing more can be done on it")
    return req


def create(
    session: Session, settings: Settings, principal: Principal, body: RequestCreate, now: datetime
) -> PersonRequest:
    if body.received_at > now:
        raise InvalidInput("received_at", "received_at is in the future: give when the request arrived")
    for i, model in enumerate(body.models):
        audits.check_model(settings, model, f"models[{i}]")
    req = PersonRequest(
        principal=principal.id,
        owner_key_id=principal.key_id,
        subject_name=body.subject.name,
        wikidata_id=body.subject.wikidata_id,
        facts=[f.model_dump() for f in body.subject.facts],
        rights=list(body.rights),
        models=list(body.models),
        identity_check=body.identity_check,
        received_at=body.received_at,
        due_at=due(body.received_at, extended=False),
    )
    session.add(req)
    session.flush()
    dates = {"received_at": utc(req.received_at).isoformat(), "due_at": utc(req.due_at).isoformat()}
    counts = {"rights": sorted(req.rights), "models": req.models, "identity_check": req.identity_check}
    _record(session, settings, principal, EntryKind.REQUEST_RECEIVED, req, dates | counts)
    if body.identity_check != IdentityCheck.PENDING:
        _identity_entry(session, settings, principal, req, now)
    return req


def _identity_entry(session: Session, settings: Settings, principal: Principal, req: PersonRequest, now: datetime):  # noqa: ANN202
    _record(session, settings, principal, EntryKind.REQUEST_IDENTITY, req, {"status": req.identity_check})
    if req.identity_check == IdentityCheck.FAILED:
        _refuse(session, settings, principal, req, "We could not confirm who made this request.", now)


def check_identity(
    session: Session, settings: Settings, principal: Principal, request_id: str, status: str, now: datetime
) -> PersonRequest:
    req = _open(session, principal, request_id)
    if req.identity_check != IdentityCheck.PENDING:
        raise Conflict(f"the identity check is {req.identity_check} already")
    req.identity_check = status
    _identity_entry(session, settings, principal, req, now)
    return req


def extend(
    session: Session, settings: Settings, principal: Principal, request_id: str, reason: str, now: datetime
) -> PersonRequest:
    req = _open(session, principal, request_id)
    if req.extended_at is not None:
        raise Conflict("this request was extended already: Art. 12(3) allows one extension of two months")
    if now >= utc(req.due_at):
        raise Conflict("the month has run out: Art. 12(3) wants the person told of an extension within one month")
    req.extended_at, req.extension_reason = now, reason
    req.due_at = due(req.received_at, extended=True)
    digest = hashlib.sha256(reason.encode()).hexdigest()  # the reason's text is the person's letter's, not the log's
    body = {"due_at": utc(req.due_at).isoformat(), "months": EXTENSION_MONTHS, "reason_sha256": digest}
    _record(session, settings, principal, EntryKind.REQUEST_EXTENDED, req, body)
    return req


def start_audits(
    session: Session,
    settings: Settings,
    principal: Principal,
    request_id: str,
    options: SubjectAuditOptions,
    kinds: KindRegistry,
) -> PersonRequest:
    """One subject audit of the person per model of the request (a model audited already is left as it is)."""
    req = _open(session, principal, request_id)
    if req.identity_check != IdentityCheck.VERIFIED:
        raise Conflict("check the requester's identity first (POST /requests/{id}/identity)")
    have = {ra.model for ra, _ in repository.audits_of(session, req.id)}
    subject = SubjectIn(name=req.subject_name, wikidata_id=req.wikidata_id, facts=req.facts)
    for model in (m for m in req.models if m not in have):
        body = SubjectAuditCreate(kind="subject", model=model, subject=subject, options=options)
        audit, _ = audits.create_audit(session, settings, principal, body, None, kinds)
        session.add(RequestAudit(request_id=req.id, model=model, audit_id=audit.id))
    session.flush()
    return req


def register_recipient(session: Session, principal: Principal, body: RecipientCreate) -> Recipient:
    recipient = Recipient(owner_key_id=principal.key_id, name=body.name, kind=body.kind, models=list(body.models))
    session.add(recipient)
    session.flush()
    return recipient


def deliver(
    session: Session, settings: Settings, principal: Principal, request_id: str, body: DeliveryIn, now: datetime
) -> Delivery:
    """The forget set of the request's audit on ``body.model``, delivered to a registered recipient: its bytes and
    hash kept with the delivery, one evidence entry. The only act recorded and shown to the person as "sent"."""
    req = _open(session, principal, request_id)
    if Right.ERASURE not in req.rights:
        raise Conflict("the person did not ask for erasure: there is no forget set to deliver")
    recipient = repository.recipient_visible(session, principal, body.recipient_id)
    if recipient is None:
        raise InvalidInput("recipient_id", "no such recipient (or not yours): register it with POST /recipients")
    audit = _succeeded_audit(session, req, body.model)
    text, records, facts = forget_set_file(principal, audit.id, body.policy)
    sha = hashlib.sha256(text.encode()).hexdigest()
    delivery = Delivery(
        request_id=req.id,
        recipient_id=recipient.id,
        audit_id=audit.id,
        set=body.set,
        policy=body.policy,
        records=records,
        sha256=sha,
        content=text,
        delivered_at=now,
    )
    session.add(delivery)
    session.flush()
    entry = {"delivery": delivery.id, "recipient": recipient.id, "recipient_kind": recipient.kind, "set": body.set}
    entry |= {"model": audit.model, "policy": body.policy, "records": records, "sha256": sha, "facts": facts}
    about = {"subject_id": audit.subject_id, "audit_id": audit.id}  # the person's page of that audit reads it
    _record(session, settings, principal, EntryKind.REQUEST_DELIVERED, req, entry, **about)
    return delivery


def _succeeded_audit(session: Session, req: PersonRequest, model: str) -> Audit:
    for ra, audit in repository.audits_of(session, req.id):
        if ra.model == model:
            if audit is None or audit.status != AuditStatus.SUCCEEDED:
                raise Conflict(f"the request's audit on {model} has not succeeded (yet): deliver once it has")
            return audit
    raise InvalidInput("model", "the request has no audit on this model: POST /requests/{id}/audits first")


def delivery_file(session: Session, principal: Principal, request_id: str, delivery_id: str) -> Delivery:
    """A delivered file, read: the access log records whose data it disclosed (as every read of a person's facts)."""
    req = get(session, principal, request_id)
    found = repository.delivery(session, req.id, delivery_id)
    if found is None:
        raise NotFound("no such delivery of this request")
    audit = session.get(Audit, found.audit_id) if found.audit_id else None
    subject_id = audit.subject_id if audit else None
    access_log.record(session, principal, "read_delivery", subject_id=subject_id, audit_id=found.audit_id)
    return found


def record_verification(
    session: Session, settings: Settings, principal: Principal, request_id: str, audit_id: str, now: datetime
) -> PersonRequest:
    """A finished verification audit of the person's delivered facts, recorded on the request."""
    req = _open(session, principal, request_id)
    if not repository.deliveries_of(session, [req.id]):
        raise Conflict("nothing was delivered for this request: there is nothing to verify")
    audit = audits.get_audit(session, principal, audit_id)
    if audit.kind != "verification" or audit.status != AuditStatus.SUCCEEDED:
        raise InvalidInput("audit_id", "name a verification audit that has succeeded")
    before = [a.id for _, a in repository.audits_of(session, req.id) if a is not None]
    facts = repository.verified_facts(session, audit.id, before)
    if not facts:
        raise InvalidInput("audit_id", "this verification checked none of the request's audited facts")
    req.verification_audit_id, req.verified_at = audit.id, now
    req.verified_forgotten = all(f.status == "removed" for f in facts)
    body = {"verification_audit_id": audit.id, "facts": len(facts), "forgotten": req.verified_forgotten}
    _record(session, settings, principal, EntryKind.REQUEST_VERIFIED, req, body)
    return req


def answer(session: Session, settings: Settings, principal: Principal, request_id: str, now: datetime) -> PersonRequest:
    req = _open(session, principal, request_id)
    statuses = [a.status if a else None for _, a in repository.audits_of(session, req.id)]
    delivered = bool(repository.deliveries_of(session, [req.id]))
    current = state(req, statuses, delivered)
    if current in (RequestState.RECEIVED, RequestState.IDENTITY_CHECKED):
        raise Conflict("the request's audits have not all succeeded: answer once they have (or refuse it)")
    if current == RequestState.DELIVERED:
        raise Conflict("a forget set was delivered: record its verification first (POST /requests/{id}/verification)")
    req.answered_at = now
    body = {"answered_at": now.isoformat(), "on_time": now < utc(req.due_at), "deliveries": int(delivered)}
    _record(session, settings, principal, EntryKind.REQUEST_ANSWERED, req, body)
    return req


def refuse(
    session: Session, settings: Settings, principal: Principal, request_id: str, reason: str, now: datetime
) -> PersonRequest:
    return _refuse(session, settings, principal, _open(session, principal, request_id), reason, now)


def _refuse(
    session: Session, settings: Settings, principal: Principal, req: PersonRequest, reason: str, now: datetime
) -> PersonRequest:
    req.refused_at, req.refusal_reason = now, reason
    body = {"refused_at": now.isoformat(), "reason_sha256": hashlib.sha256(reason.encode()).hexdigest()}
    _record(session, settings, principal, EntryKind.REQUEST_REFUSED, req, body)
    return req
