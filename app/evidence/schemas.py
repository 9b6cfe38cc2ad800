"""The evidence record's entry kinds and answer shapes (the one list of kinds: workers import it too)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field


class EntryKind(StrEnum):
    AUDIT_FINISHED = "audit_finished"  # a worker ended an audit (succeeded or failed)
    FORGET_SET_EXPORT = "forget_set_export"  # a forget set was delivered in full
    VERIFICATION = "verification"  # an unlearned model was checked against a forget set (no such flow yet)
    ERASED = "erased"  # DELETE /subjects/{id}


class EvidenceEntryRead(BaseModel):
    seq: int
    at: datetime
    kind: str
    subject_ref: str | None = Field(description="HMAC-SHA256 of the subject reference (no personal data)")
    audit_id: str | None
    payload: str = Field(description="the canonical JSON that `hash` covers; parse it for the entry's body")
    hash: str
    key_id: str
    signature: str


class EvidencePage(BaseModel):
    items: list[EvidenceEntryRead]
    after: int = Field(description="the sequence number this page starts after")
    next_after: int | None = Field(description="pass as `after` for the next page; null at the chain's end")


class PublicKey(BaseModel):
    key_id: str
    algorithm: str = "Ed25519"
    pem: str = Field(
        description="SubjectPublicKeyInfo PEM: save it and run `memaudit evidence verify FILE --public-key KEY.pem`"
    )
