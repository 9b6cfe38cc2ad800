"""Accountability records (GDPR Art. 30): who read or exported whose data, and revoked data-subject tokens.

Neither table holds a name or a fact: subjects and audits appear by id only, and the access log keeps those
ids after an erasure (it records that the data was processed, not the data)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow

BIG_ID = BigInteger().with_variant(Integer(), "sqlite")  # SQLite autoincrements INTEGER PRIMARY KEY only


class AccessLog(Base):
    __tablename__ = "access_log"

    id: Mapped[int] = mapped_column(BIG_ID, primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    principal: Mapped[str] = mapped_column(String(64))  # "key:12", "subject:<audit id>", "cli"
    role: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(32))  # read_facts, export_forget_set, erase_subject, revoke_token
    subject_id: Mapped[int | None] = mapped_column(Integer, index=True)  # no foreign key: survives erasure
    audit_id: Mapped[str | None] = mapped_column(String(32), index=True)


class RevokedSubjectToken(Base):
    """A data-subject token (derived from the audit id, so it cannot be deleted) that no longer authenticates."""

    __tablename__ = "revoked_subject_tokens"

    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), primary_key=True)
    revoked_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_by: Mapped[str] = mapped_column(String(64))
