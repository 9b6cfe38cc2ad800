"""Sentence NLL cache keyed by (model fingerprint, exact sentence).

Only a SHA-256 of the sentence is stored, never the text: sentences carry names and facts."""

from __future__ import annotations

from sqlalchemy import Float, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, CreatedAtMixin


class NllCache(CreatedAtMixin, Base):
    __tablename__ = "nll_cache"

    model_fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    text_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    nll: Mapped[float] = mapped_column(Float)
