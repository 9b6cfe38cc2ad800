"""Request and response shapes of a person's request, its recipients and deliveries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.db.vocabulary import IdentityCheck, RecipientKind, RequestState, Right
from app.policies import DEFAULT, POLICIES
from app.subjects.schemas import FactIn, SubjectAuditOptions
from app.validation import RequestModel

RightName = Literal[tuple(r.value for r in Right)]
IdentityName = Literal[tuple(i.value for i in IdentityCheck)]
RecipientKindName = Literal[tuple(k.value for k in RecipientKind)]
PolicyName = Literal[tuple(POLICIES)]
AwareTime = datetime  # read with strict=False below: JSON carries it as an ISO 8601 text
REASON = Field(min_length=10, max_length=2000, pattern=r"\S", description="in words the person can read")


class RequestSubjectRead(RequestModel):
    """The person as a request holds them; after the person's erasure the name reads "(erased)" and no fact is
    left (app/subjects/erasure.py)."""

    name: str = Field(description="the person's name, as they gave it")
    wikidata_id: str | None = None
    facts: list[FactIn] = Field(default_factory=list)


class RequestSubject(RequestModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200, pattern=r"\S", description="the person's name, as they gave it")
    wikidata_id: str | None = Field(default=None, pattern=r"^Q[1-9][0-9]{0,11}$", description="e.g. Q937")
    facts: list[FactIn] = Field(default_factory=list, max_length=200, description="the facts the person names")

    @model_validator(mode="after")
    def _something_to_audit(self) -> RequestSubject:
        if not self.facts and self.wikidata_id is None:
            raise ValueError("give the person's facts or their Wikidata id: an audit needs one of them")
        return self


class RequestCreate(RequestModel):
    model_config = ConfigDict(extra="forbid")

    subject: RequestSubject
    rights: list[RightName] = Field(min_length=1, max_length=3, description="the rights the person invokes")
    models: list[str] = Field(
        min_length=1, max_length=20, description="the models or deployments concerned (one audit each)"
    )
    identity_check: IdentityName = Field(default="pending", description="where checking who asks stands")
    received_at: AwareTime = Field(
        strict=False, description="when the request was received, with its time zone (the deadline runs from it)"
    )

    @field_validator("received_at")
    @classmethod
    def _zoned(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("received_at needs a time zone, e.g. 2026-04-01T09:00:00Z")
        return value.astimezone(UTC)  # stored in UTC; the deadline is counted in UTC

    @model_validator(mode="after")
    def _clean(self) -> RequestCreate:
        if len(set(self.rights)) != len(self.rights) or len(set(self.models)) != len(self.models):
            raise ValueError("name each right and each model once")
        return self


class IdentityIn(RequestModel):
    status: Literal["verified", "failed"]


class ExtensionIn(RequestModel):
    reason: str = REASON


class RefusalIn(RequestModel):
    reason: str = REASON


class AuditsIn(RequestModel):
    options: SubjectAuditOptions = Field(default_factory=SubjectAuditOptions)


class DeliveryIn(RequestModel):
    recipient_id: str = Field(min_length=1, max_length=32)
    model: str = Field(min_length=1, max_length=300, description="the request's audit on this model is delivered")
    set: Literal["forget"] = Field(default="forget", description="what is delivered: the forget set")
    policy: PolicyName = Field(default=DEFAULT, description="which facts the forget set holds (GET /forget-set)")


class VerificationIn(RequestModel):
    audit_id: str = Field(min_length=1, max_length=32, description="a finished verification audit of the person")


class RecipientCreate(RequestModel):
    name: str = Field(min_length=1, max_length=200, pattern=r"\S", description="a system, e.g. 'unlearning-eu-1'")
    kind: RecipientKindName
    models: list[str] = Field(default_factory=list, max_length=20, description="the models it unlearns or serves")


class RecipientRead(BaseModel):
    id: str
    name: str
    kind: str
    models: list[str]
    created_at: datetime


class RequestAuditRead(BaseModel):
    model: str
    audit_id: str | None
    status: str | None = Field(description="the audit's status; null once the audit was erased")


class DeliveryRead(BaseModel):
    id: str
    recipient: RecipientRead
    model: str | None
    audit_id: str | None
    set: str
    policy: str
    records: int
    sha256: str = Field(description="the SHA-256 of the delivered file (GET .../deliveries/{id}/file)")
    delivered_at: datetime


class VerificationRead(BaseModel):
    audit_id: str | None
    forgotten: bool | None = Field(description="did every fact checked read as removed")
    verified_at: datetime


class RequestRead(BaseModel):
    id: str
    state: RequestState
    subject: RequestSubjectRead
    rights: list[str]
    models: list[str]
    identity_check: str
    received_at: datetime
    due_at: datetime = Field(description="one calendar month after received_at, or three once extended")
    overdue: bool = Field(description="due_at has passed and the request is neither answered nor refused")
    days_left: int = Field(description="whole days until due_at (negative: overdue)")
    extended_at: datetime | None
    extension_reason: str | None
    audits: list[RequestAuditRead]
    deliveries: list[DeliveryRead]
    verification: VerificationRead | None
    answered_at: datetime | None
    refused_at: datetime | None
    refusal_reason: str | None


class RequestSummary(BaseModel):
    """A line of the officer's queue (no personal data beyond what the officer holds anyway: the id and dates)."""

    id: str
    state: RequestState
    rights: list[str]
    models: list[str]
    received_at: datetime
    due_at: datetime
    overdue: bool
    days_left: int


class RequestPage(BaseModel):
    items: list[RequestSummary]
    total: int
