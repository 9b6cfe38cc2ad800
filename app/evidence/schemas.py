"""The evidence record's entry kinds and answer shapes (the one list of kinds: workers import it too)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class EntryKind(StrEnum):
    AUDIT_FINISHED = "audit_finished"  # a worker ended an audit (succeeded or failed)
    # a forget set was exported in full (GET /forget-set: a download, to look at or to hand on by hand): what left
    # the service, never shown to the person as "sent"; only a request's delivery (REQUEST_DELIVERED) is
    FORGET_SET_EXPORT = "forget_set_export"
    # a rectification set (GET /rectification-set: the false values a model asserts, issue 42), the same body
    RECTIFICATION_SET_EXPORT = "rectification_set_export"
    # a verification audit checked an unlearned model, one entry per forgotten person (workers/jobs/verification.py):
    # body {"forgotten": bool, "export_seq": the export verified or null, ...}; the person's page reads it
    VERIFICATION = "verification"
    ERASED = "erased"  # DELETE /subjects/{id}
    # a person's request (app/requests), one entry per step; bodies hold the request id, dates, counts and ids only
    REQUEST_RECEIVED = "request_received"
    REQUEST_IDENTITY = "request_identity_checked"
    REQUEST_EXTENDED = "request_extended"
    REQUEST_DELIVERED = "request_delivered"  # a forget set delivered to a registered recipient: the only "sent"
    REQUEST_VERIFIED = "request_verified"
    REQUEST_ANSWERED = "request_answered"
    REQUEST_REFUSED = "request_refused"


class PublicKey(BaseModel):
    key_id: str
    algorithm: str = "Ed25519"
    pem: str = Field(
        description="SubjectPublicKeyInfo PEM: save it and run `memaudit evidence verify FILE --public-key KEY.pem`"
    )
