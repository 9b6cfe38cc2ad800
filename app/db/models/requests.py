"""A person's request (app/requests): its audits (one per model), the registered recipients and the deliveries of
forget sets to them, the verification after unlearning. ``subject_name`` and ``facts`` are personal data, kept to
audit and to answer the person; the evidence record keeps the request's steps without them."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import uuid4

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, CreatedAtMixin, JSONType


def new_id() -> str:
    return uuid4().hex


class PersonRequest(CreatedAtMixin, Base):
    __tablename__ = "requests"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    principal: Mapped[str] = mapped_column(String(64))
    owner_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"), index=True)
    subject_name: Mapped[str] = mapped_column(String(200))
    wikidata_id: Mapped[str | None] = mapped_column(String(20))
    facts: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    rights: Mapped[list[str]] = mapped_column(JSONType)  # app.db.vocabulary.Right
    models: Mapped[list[str]] = mapped_column(JSONType)
    identity_check: Mapped[str] = mapped_column(String(16))  # app.db.vocabulary.IdentityCheck
    received_at: Mapped[datetime] = mapped_column(index=True)
    due_at: Mapped[datetime] = mapped_column(index=True)
    extended_at: Mapped[datetime | None]
    extension_reason: Mapped[str | None] = mapped_column(Text)
    verification_audit_id: Mapped[str | None] = mapped_column(ForeignKey("audits.id", ondelete="SET NULL"))
    verified_forgotten: Mapped[bool | None]
    verified_at: Mapped[datetime | None]
    answered_at: Mapped[datetime | None]
    refused_at: Mapped[datetime | None]
    refusal_reason: Mapped[str | None] = mapped_column(Text)


class RequestAudit(Base):
    """One subject audit of the request's person on one of its models."""

    __tablename__ = "request_audits"
    __table_args__ = (UniqueConstraint("request_id", "model"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    request_id: Mapped[str] = mapped_column(ForeignKey("requests.id", ondelete="CASCADE"), index=True)
    model: Mapped[str] = mapped_column(String(300))
    audit_id: Mapped[str | None] = mapped_column(ForeignKey("audits.id", ondelete="SET NULL"), index=True)


class Recipient(CreatedAtMixin, Base):
    """Who receives forget sets (Art. 19): an unlearning pipeline, a deployment. Its name names a system, not a
    person."""

    __tablename__ = "recipients"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    owner_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(32))  # app.db.vocabulary.RecipientKind
    models: Mapped[list[str]] = mapped_column(JSONType, default=list)  # the models it serves or unlearns


class Delivery(Base):
    """A forget set delivered to a recipient: the exact bytes (personal data, until erasure) and their hash."""

    __tablename__ = "deliveries"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    request_id: Mapped[str] = mapped_column(ForeignKey("requests.id", ondelete="CASCADE"), index=True)
    recipient_id: Mapped[str] = mapped_column(ForeignKey("recipients.id"), index=True)
    audit_id: Mapped[str | None] = mapped_column(ForeignKey("audits.id", ondelete="SET NULL"))
    set: Mapped[str] = mapped_column(String(16))  # "forget"
    policy: Mapped[str] = mapped_column(String(32))
    records: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    content: Mapped[str] = mapped_column(Text)
    delivered_at: Mapped[datetime]
