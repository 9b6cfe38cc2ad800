"""Capacity audits (Morris et al. 2025): one row per grid cell with every number recorded, and the samples
of a text-mode audit with their per-sample memorization.

A cell's training data is never stored: it is regenerated from (seed, N, S, V). While a cell trains, its
latest checkpoint (model + optimizer state, a few MB for small models) is kept in `checkpoint` so a restarted
worker resumes; it is cleared when the cell is done.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Float, ForeignKey, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, JSONType, utcnow
from app.db.vocabulary import CellStatus


class CapacityCell(Base):
    __tablename__ = "capacity_cells"
    __table_args__ = (UniqueConstraint("audit_id", "position"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer(), "sqlite"), primary_key=True)
    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)  # order in the grid (and of training)
    # the cell's coordinates
    n_layer: Mapped[int] = mapped_column(Integer)
    d_model: Mapped[int] = mapped_column(Integer)
    n_head: Mapped[int] = mapped_column(Integer)
    vocab_size: Mapped[int] = mapped_column(Integer)
    seq_len: Mapped[int] = mapped_column(Integer)
    n_samples: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    precision: Mapped[str] = mapped_column(String(8))
    params: Mapped[int] = mapped_column(BigInteger)
    entropy_bits: Mapped[float] = mapped_column(Float)
    # state and results
    status: Mapped[str] = mapped_column(String(16), default=CellStatus.PENDING)
    steps_done: Mapped[int] = mapped_column(Integer, default=0)
    steps_total: Mapped[int] = mapped_column(Integer)
    seconds: Mapped[float] = mapped_column(Float, default=0.0)
    memorized_bits: Mapped[float | None] = mapped_column(Float)
    bits_per_param: Mapped[float | None] = mapped_column(Float)
    train_bits_per_token: Mapped[float | None] = mapped_column(Float)
    heldout_bits_per_token: Mapped[float | None] = mapped_column(Float)
    mia_f1: Mapped[float | None] = mapped_column(Float)
    mia_auc: Mapped[float | None] = mapped_column(Float)
    extraction_rate: Mapped[float | None] = mapped_column(Float)
    curve: Mapped[list[Any]] = mapped_column(JSONType, default=list)  # [[step, seconds, memorized bits], ...]
    checkpoint: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class CapacityText(Base):
    """One sample of a text-mode audit. The text is the user's data: it is never logged or sent to Redis."""

    __tablename__ = "capacity_texts"
    __table_args__ = (UniqueConstraint("audit_id", "position"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer(), "sqlite"), primary_key=True)
    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    nll_target_bits: Mapped[float | None] = mapped_column(Float)
    nll_reference_bits: Mapped[float | None] = mapped_column(Float)
    memorized_bits: Mapped[float | None] = mapped_column(Float)
    rarity: Mapped[float | None] = mapped_column(Float)
