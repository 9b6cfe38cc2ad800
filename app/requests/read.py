"""A request as the API shows it: its state, deadline, audits, deliveries and verification (reads only)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from app.db.models.requests import Delivery, PersonRequest, Recipient
from app.requests import repository
from app.requests.schemas import (
    DeliveryRead,
    RecipientRead,
    RequestAuditRead,
    RequestRead,
    RequestSubjectRead,
    RequestSummary,
    VerificationRead,
)
from app.requests.service import days_left, overdue, state, utc
from app.subjects.schemas import FactIn


def _delivery(d: Delivery, r: Recipient, model: str | None) -> DeliveryRead:
    return DeliveryRead(
        id=d.id,
        recipient=RecipientRead.model_validate(r, from_attributes=True),
        model=model,
        audit_id=d.audit_id,
        set=d.set,
        policy=d.policy,
        records=d.records,
        sha256=d.sha256,
        delivered_at=utc(d.delivered_at),
    )


def delivery(session: Session, d: Delivery) -> DeliveryRead:
    recipient = session.get(Recipient, d.recipient_id)
    models = {a.id: a.model for _, a in repository.audits_of(session, d.request_id) if a is not None}
    return _delivery(d, recipient, models.get(d.audit_id))


def request(session: Session, req: PersonRequest, now: datetime) -> RequestRead:
    session.flush()
    audits = repository.audits_of(session, req.id)
    models = {a.id: a.model for _, a in audits if a is not None}
    deliveries = [_delivery(d, r, models.get(d.audit_id)) for d, r in repository.deliveries_of(session, [req.id])]
    verification = None
    if req.verified_at is not None:
        verification = VerificationRead(
            audit_id=req.verification_audit_id, forgotten=req.verified_forgotten, verified_at=utc(req.verified_at)
        )
    subject = RequestSubjectRead.model_construct(
        name=req.subject_name, wikidata_id=req.wikidata_id, facts=[FactIn.model_construct(**f) for f in req.facts]
    )
    return RequestRead(
        id=req.id,
        state=state(req, [a.status if a else None for _, a in audits], bool(deliveries)),
        subject=subject,
        rights=req.rights,
        models=req.models,
        identity_check=req.identity_check,
        received_at=utc(req.received_at),
        due_at=utc(req.due_at),
        overdue=overdue(req, now),
        days_left=days_left(req, now),
        extended_at=utc(req.extended_at) if req.extended_at else None,
        extension_reason=req.extension_reason,
        audits=[
            RequestAuditRead(model=ra.model, audit_id=ra.audit_id, status=a.status if a else None) for ra, a in audits
        ],
        deliveries=deliveries,
        verification=verification,
        answered_at=utc(req.answered_at) if req.answered_at else None,
        refused_at=utc(req.refused_at) if req.refused_at else None,
        refusal_reason=req.refusal_reason,
    )


def summaries(session: Session, rows: list[PersonRequest], now: datetime) -> list[RequestSummary]:
    ids = [r.id for r in rows]
    statuses = repository.states_of(session, ids)
    delivered = {d.request_id for d, _ in repository.deliveries_of(session, ids)}
    return [
        RequestSummary(
            id=r.id,
            state=state(r, statuses.get(r.id, []), r.id in delivered),
            rights=r.rights,
            models=r.models,
            received_at=utc(r.received_at),
            due_at=utc(r.due_at),
            overdue=overdue(r, now),
            days_left=days_left(r, now),
        )
        for r in rows
    ]
