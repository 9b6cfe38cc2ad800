"""Training-dynamics audits (Ghosh et al., 2025): the audited strings and their loss trajectories.

A string's text may be personal data (a customer record in a fine-tuning set): it lives only here and is deleted
with its audit (cascade). Imported-trajectory audits store no text at all, only the provider's string ids.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, JSONType

BigId = BigInteger().with_variant(Integer(), "sqlite")


class DynamicsAudit(Base):
    """Where a dynamics audit's strings come from and what it costs (the audit row holds options and summary)."""

    __tablename__ = "dynamics_audits"

    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), primary_key=True)
    source: Mapped[str] = mapped_column(String(16))  # strings | pcfg | imported
    recipe: Mapped[str] = mapped_column(String(16))  # scratch | finetune | imported
    n_strings: Mapped[int] = mapped_column(Integer)
    passes: Mapped[int] = mapped_column(Integer, default=0)  # K x E training passes (0 for imported)
    epochs: Mapped[list[int] | None] = mapped_column(JSONType)  # recorded epochs, once known
    language: Mapped[dict[str, Any] | None] = mapped_column(JSONType)  # PCFG settings and entropy, if generated


class DynamicsString(Base):
    """One distinct string of the audit, with its trajectories: loss per recorded epoch (nats/token) in the runs
    that trained on it (mean) and in the run that held it out."""

    __tablename__ = "dynamics_strings"
    # explicit names: the convention would give both the same name (it uses the first column only)
    __table_args__ = (
        UniqueConstraint("audit_id", "position", name="uq_dynamics_strings_position"),
        UniqueConstraint("audit_id", "string_id", name="uq_dynamics_strings_string_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    string_id: Mapped[str] = mapped_column(String(200))
    text: Mapped[str | None] = mapped_column(Text)
    count: Mapped[int] = mapped_column(Integer, default=1)  # occurrences in the training set
    frequency: Mapped[float | None] = mapped_column(Float)  # as given (imported) or the count
    probability: Mapped[float | None] = mapped_column(Float)  # exact p(x) under a generated PCFG
    fold: Mapped[int | None] = mapped_column(Integer)
    train_loss: Mapped[list[float] | None] = mapped_column(JSONType)
    heldout_loss: Mapped[list[float] | None] = mapped_column(JSONType)
