from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, CreatedAtMixin
from app.db.vocabulary import ROLES as ROLES  # re-exported
from app.db.vocabulary import Role as Role


class ApiKey(CreatedAtMixin, Base):
    """An API key. Only a peppered SHA-256 of the secret is stored; ``prefix`` finds the row."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    secret_hash: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(100), default="")
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    last_used_at: Mapped[datetime | None]
