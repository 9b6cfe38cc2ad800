"""Audits of every kind, and idempotency keys for POST /audits."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import uuid4

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, CreatedAtMixin, JSONType

AUDIT_KINDS = ("subject", "coverage", "capacity", "dynamics", "null")
AUDIT_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
FINAL_STATUSES = ("succeeded", "failed", "cancelled")


def new_audit_id() -> str:
    return uuid4().hex


class Audit(CreatedAtMixin, Base):
    __tablename__ = "audits"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_audit_id)
    kind: Mapped[str] = mapped_column(String(16), index=True)
    model: Mapped[str] = mapped_column(String(300), index=True)
    options: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error: Mapped[str | None] = mapped_column(Text)
    owner_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"), index=True)
    # Subject audits: the audited person. Erasing the subject erases the audit and its results.
    subject_id: Mapped[int | None] = mapped_column(ForeignKey("subjects.id", ondelete="CASCADE"), index=True)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0)


class IdempotencyKey(CreatedAtMixin, Base):
    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("principal", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    principal: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"))
