"""The evidence record's entry kinds and answer shapes (the one list of kinds: workers import it too)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class EntryKind(StrEnum):
    AUDIT_FINISHED = "audit_finished"  # a worker ended an audit (succeeded or failed)
    FORGET_SET_EXPORT = "forget_set_export"  # a forget set was delivered in full
    # a verification audit checked an unlearned model, one entry per forgotten person (workers/jobs/verification.py):
    # body {"forgotten": bool, "export_seq": the export verified or null, ...}; the person's page reads it
    VERIFICATION = "verification"
    ERASED = "erased"  # DELETE /subjects/{id}


class PublicKey(BaseModel):
    key_id: str
    algorithm: str = "Ed25519"
    pem: str = Field(
        description="SubjectPublicKeyInfo PEM: save it and run `memaudit evidence verify FILE --public-key KEY.pem`"
    )
