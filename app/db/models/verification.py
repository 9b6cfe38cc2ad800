"""Verification audits (issue 26): an unlearned ("after") model checked against the audits of a "before" model.

A person of a verification points at a stored subject (deleting the subject deletes its rows here: cascade); a
fact row holds ids, p-values, statuses and template outcomes, never a name or a value."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Boolean, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.base import Base, JSONType

BigId = BigInteger().with_variant(Integer(), "sqlite")


class VerificationPerson(Base):
    """One person of a verification: forgotten (their forget-set facts are checked) or locality (untouched)."""

    __tablename__ = "verification_people"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    subject_id: Mapped[int] = mapped_column(ForeignKey("subjects.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(16))  # forgotten | locality
    before_audit_id: Mapped[str | None] = mapped_column(ForeignKey("audits.id", ondelete="SET NULL"), index=True)
    # property id -> template indices the forget set exposed (held out by the probe); null: the audited ones
    exposed: Mapped[dict[str, list[int]] | None] = mapped_column(JSONType)
    targets: Mapped[list[str] | None] = mapped_column(JSONType)  # property ids of the forget set (forgotten)
    relearned: Mapped[bool] = mapped_column(Boolean, default=False)  # its facts are the relearning probe's texts
    scored: Mapped[bool] = mapped_column(Boolean, default=False)  # the job has stored its facts
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSONType)

    facts: Mapped[list[VerificationFact]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="VerificationFact.id"
    )


class VerificationFact(Base):
    """One property of one person, before and after: p-values, verdicts, the paired test, the status, and the
    template-level outcomes and probes behind them (``detail``)."""

    __tablename__ = "verification_facts"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    person_id: Mapped[int] = mapped_column(ForeignKey("verification_people.id", ondelete="CASCADE"), index=True)
    audit_id: Mapped[str] = mapped_column(String(32), index=True)
    property_id: Mapped[str] = mapped_column(String(20))
    target: Mapped[bool] = mapped_column(Boolean)  # in the forget set (else: locality)
    status: Mapped[str] = mapped_column(String(24))  # app.verification.statuses.FactStatus
    reason: Mapped[str | None] = mapped_column(Text)  # why inconclusive (a fixed sentence: no personal data)
    p_before: Mapped[float | None] = mapped_column(Float)
    p_after: Mapped[float | None] = mapped_column(Float)
    paired_p: Mapped[float | None] = mapped_column(Float)
    memorized_before: Mapped[bool | None] = mapped_column(Boolean)
    memorized_after: Mapped[bool | None] = mapped_column(Boolean)
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
