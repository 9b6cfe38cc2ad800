"""Null calibration: per (model, property, audit configuration), the statistics of facts about fictitious people.

A null distribution is computed by a `null` audit (an ordinary job on the queue) and re-used by every subject
audit with the same model fingerprint and configuration (``key``). The fictitious names and values are generated
and are nobody's personal data.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Boolean, Float, ForeignKey, Integer, String, Text, true
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, CreatedAtMixin, JSONType

BigId = BigInteger().with_variant(Integer(), "sqlite")


class NullDistribution(CreatedAtMixin, Base):
    """One property's null, created with its null audit (status: the audit's) and filled in by the job."""

    __tablename__ = "null_distributions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), index=True)
    model: Mapped[str] = mapped_column(String(300), index=True)
    property_id: Mapped[str] = mapped_column(String(16))
    key: Mapped[str] = mapped_column(String(64), index=True)  # hash of `config`: what a subject audit must match
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)  # templates, counterfactuals, alpha, look-alikes …
    method: Mapped[str] = mapped_column(String(16))  # full | pseudo
    fingerprint: Mapped[str | None] = mapped_column(String(64), index=True)  # the scoring model's, once run
    people: Mapped[int | None] = mapped_column(Integer)  # K fictitious people
    n_facts: Mapped[int | None] = mapped_column(Integer)  # null facts (K, or K x candidates with pseudo-truths)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSONType)  # rates per policy, cost
    source: Mapped[str | None] = mapped_column(String(16))  # shipped | imported (None: computed here)
    artifact_sha256: Mapped[str | None] = mapped_column(String(64), index=True)  # the imported artifact's digest


class NullFact(Base):
    """One null fact: a fictitious person's (assigned) value, or another candidate standing in as the truth."""

    __tablename__ = "null_facts"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    distribution_id: Mapped[int] = mapped_column(ForeignKey("null_distributions.id", ondelete="CASCADE"), index=True)
    person: Mapped[int] = mapped_column(Integer)  # index in the null cohort
    name: Mapped[str] = mapped_column(String(200))
    value: Mapped[str] = mapped_column(Text)
    assigned: Mapped[bool] = mapped_column(Boolean)  # the person's own value (False: a pseudo-truth)
    share: Mapped[float] = mapped_column(Float)
    strict: Mapped[bool] = mapped_column(Boolean)
    lenient: Mapped[bool] = mapped_column(Boolean)
    z_star: Mapped[float | None] = mapped_column(Float)  # mean z* over rank-1 templates
    n_templates: Mapped[int] = mapped_column(Integer)
    n_z: Mapped[int] = mapped_column(Integer)  # rank-1 templates with a defined z*
    statistic: Mapped[float | None] = mapped_column(Float)  # the verdict statistic (mean truth z)
    n_values: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # the null fact's shape m
    # its true value is outside the counterfactual pool (core.names.out_of_pool); null facts from before it: in pool
    in_pool: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    misattribution: Mapped[float | None] = mapped_column(Float)  # the same statistic of this null fact (None: older)
