"""Batches (cohorts): one roster submitted at once, one subject audit per person and model.

A batch row holds no personal data: the people are ordinary subjects with ordinary subject audits
(``audits.batch_id``), so erasure, retention and visibility apply to them exactly as to single audits."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import uuid4

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, CreatedAtMixin, JSONType


def new_batch_id() -> str:
    return uuid4().hex


class Batch(CreatedAtMixin, Base):
    __tablename__ = "batches"
    # Idempotency-Key per principal (NULL keys never collide: Postgres and SQLite treat NULLs as distinct).
    __table_args__ = (UniqueConstraint("principal", "idempotency_key"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_batch_id)
    principal: Mapped[str] = mapped_column(String(64))
    owner_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"), index=True)
    models: Mapped[list[str]] = mapped_column(JSONType)
    options: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    people: Mapped[int] = mapped_column(Integer)  # roster rows accepted (one audit per row and model)
    rejected: Mapped[int] = mapped_column(Integer, default=0)  # rows left out with ?partial=true
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    request_hash: Mapped[str | None] = mapped_column(String(64))
    cancelled_at: Mapped[datetime | None]
