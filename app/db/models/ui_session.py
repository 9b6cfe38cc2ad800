"""A signed-in dashboard session, kept server-side so that signing out ends it (app/ui/session.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, CreatedAtMixin


class DashboardSession(CreatedAtMixin, Base):
    """One row per signed-in browser: created at sign-in, deleted at sign-out, at the key's revocation (or the
    subject token's) and once expired. The cookie carries a random session id; only its SHA-256 is stored."""

    __tablename__ = "ui_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # SHA-256 (hex) of the cookie's session id
    principal: Mapped[str] = mapped_column(String(64), index=True)  # key:<id> or subject:<audit id>
    key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), index=True)
    expires_at: Mapped[datetime] = mapped_column(index=True)
