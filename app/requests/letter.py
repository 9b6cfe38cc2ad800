"""The reply letter to the person (Art. 12(1) "clear and plain language"), built only from what is stored: the
request's audits' verdicts (each fact's calibrated verdict, as GET /audits/{id}/facts gives it), its deliveries to
registered recipients, the verification recorded on it, its dates. Words only; reads (the access log records the
reading of the person's facts, as every read of them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.models.audit import AuditStatus
from app.db.models.requests import PersonRequest
from app.privacy import access_log
from app.requests import repository
from app.requests.service import utc
from app.subjects import service as subjects

# what a verification's fact status says, in words
AFTER = {
    "removed": "the model no longer gives it away",
    "still retrievable": "the model still gives it away",
    "inconclusive": "the check could not tell",
}


@dataclass
class Verdict:
    model: str
    audit_id: str
    property: str
    label: str
    verdict: str  # "found" | "not found" | "not yet known"  (the API's calibration.memorized: true, false, none)


@dataclass
class After:
    property: str
    status: str  # the verification's fact status (app.verification.schemas.FactStatus)
    text: str


@dataclass
class Letter:
    name: str
    received: str
    due: str
    rights: list[str]
    verdicts: list[Verdict] = field(default_factory=list)
    waiting_models: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    after: list[After] = field(default_factory=list)
    refused: str | None = None


def day(value: datetime | None) -> str:
    return f"{utc(value):%d %B %Y}".lstrip("0") if value else ""


def verdict_word(memorized: bool | None, status: str | None) -> str:
    if status != "ready" or memorized is None:
        return "not yet known"
    return "found" if memorized else "not found"


def build(session: Session, principal: Principal, req: PersonRequest) -> Letter:
    letter = Letter(req.subject_name, day(req.received_at), day(req.due_at), list(req.rights))
    letter.refused = req.refusal_reason
    for ra, audit in repository.audits_of(session, req.id):
        if audit is None or audit.status != AuditStatus.SUCCEEDED:
            letter.waiting_models.append(ra.model)
            continue
        facts = subjects.read_facts(session, principal, audit.id, "summary").facts
        access_log.record(session, principal, "read_facts", subject_id=audit.subject_id, audit_id=audit.id)
        for f in facts:
            cal = f.calibration
            word = verdict_word(cal.memorized if cal else None, cal.status if cal else None)
            letter.verdicts.append(Verdict(audit.model, audit.id, f.property, f.label, word))
    for d, r in repository.deliveries_of(session, [req.id]):
        facts = "one fact" if d.records == 1 else f"{d.records} facts"
        letter.sent.append(f"On {day(d.delivered_at)}, a list of {facts} was sent to {r.name} to be removed.")
    if req.verification_audit_id:
        before = [a.id for _, a in repository.audits_of(session, req.id) if a is not None]
        labels = {v.property: v.label for v in letter.verdicts}
        for f in repository.verified_facts(session, req.verification_audit_id, before):
            what = AFTER.get(f.status, f.status)
            text = f"{labels.get(f.property_id, f.property_id).capitalize()}: {what}."
            letter.after.append(After(f.property_id, f.status, text))
    return letter
