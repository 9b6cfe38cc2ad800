"""Audits of every kind, and idempotency keys for POST /audits."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import uuid4

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, CreatedAtMixin, JSONType
from app.db.vocabulary import ACTIVE_STATUSES as ACTIVE_STATUSES  # re-exported
from app.db.vocabulary import FINAL_STATUSES as FINAL_STATUSES
from app.db.vocabulary import AuditStatus


def new_audit_id() -> str:
    return uuid4().hex


class Audit(CreatedAtMixin, Base):
    __tablename__ = "audits"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_audit_id)
    kind: Mapped[str] = mapped_column(String(16), index=True)
    model: Mapped[str] = mapped_column(String(300), index=True)
    options: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    status: Mapped[str] = mapped_column(String(16), default=AuditStatus.QUEUED.value, index=True)
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    # what produced the result (core.provenance: versions, scorer, model fingerprint, nulls); set by the job
    provenance: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error: Mapped[str | None] = mapped_column(Text)
    owner_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"), index=True)
    # Subject audits: the audited person. Erasing the subject erases the audit and its results.
    subject_id: Mapped[int | None] = mapped_column(ForeignKey("subjects.id", ondelete="CASCADE"), index=True)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # The worker running the audit and until when its heartbeat vouches for it (app/reliability/leases.py).
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None]
    # Audits submitted in a batch (app/batches): the batch, and the person's row in its roster (1-based).
    batch_id: Mapped[str | None] = mapped_column(ForeignKey("batches.id", ondelete="SET NULL"), index=True)
    batch_row: Mapped[int | None] = mapped_column(Integer)

    # The reconciler pages through queued audits by id (app/reliability/reconciler.py): with a 100,000-audit batch
    # queued, each page must be an index range scan, not a sort of every queued audit.
    __table_args__ = (Index("ix_audits_status_id", "status", "id"),)


class IdempotencyKey(CreatedAtMixin, Base):
    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("principal", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    principal: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"))
