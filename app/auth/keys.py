"""API keys (peppered SHA-256 at rest) and per-audit data-subject tokens (HMAC, nothing stored)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import ApiKey, RevokedSubjectToken
from app.db.models.auth import ROLES
from app.errors import InvalidInput, Unauthorized
from app.settings import Settings

KEY_PREFIX = "mak"
SUBJECT_TOKEN_PREFIX = "mas"


@dataclass(frozen=True)
class Principal:
    """Who is calling. ``audit_scope`` is set for a data-subject token: it reads that audit only."""

    id: str
    role: str
    key_id: int | None = None
    audit_scope: str | None = None

    @property
    def sees_everything(self) -> bool:
        return self.role in ("admin", "regulator")


def _hash(secret: str, settings: Settings) -> str:
    return hashlib.sha256(f"{settings.key_pepper}:{secret}".encode()).hexdigest()


def create_key(session: Session, settings: Settings, role: str, name: str = "") -> tuple[ApiKey, str]:
    """Create a key; the plain token is returned once and never stored."""
    if role not in ROLES:
        raise InvalidInput("role", f"role must be one of {', '.join(ROLES)}")
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(24)
    key = ApiKey(prefix=prefix, secret_hash=_hash(secret, settings), role=role, name=name[:100])
    session.add(key)
    session.flush()
    return key, f"{KEY_PREFIX}_{prefix}_{secret}"


def subject_token(audit_id: str, settings: Settings) -> str:
    mac = hmac.new(settings.key_pepper.encode(), f"subject:{audit_id}".encode(), hashlib.sha256).hexdigest()
    return f"{SUBJECT_TOKEN_PREFIX}_{audit_id}_{mac[:40]}"


def authenticate(session: Session, settings: Settings, token: str | None) -> Principal:
    if not token:
        raise Unauthorized(
            "missing API key: send 'Authorization: Bearer <key>' (create one with `memaudit keys create`)"
        )
    parts = token.split("_", 2)
    if len(parts) == 3 and parts[0] == SUBJECT_TOKEN_PREFIX:
        if hmac.compare_digest(subject_token(parts[1], settings), token):
            if session.get(RevokedSubjectToken, parts[1]) is not None:
                raise Unauthorized("this data-subject token was revoked; ask the auditor for the audit's results")
            return Principal(id=f"subject:{parts[1]}", role="subject", audit_scope=parts[1])
        raise Unauthorized("invalid token")
    if len(parts) != 3 or parts[0] != KEY_PREFIX:
        raise Unauthorized("malformed API key: expected 'mak_<prefix>_<secret>'")
    key = session.scalar(select(ApiKey).where(ApiKey.prefix == parts[1]))
    if key is None or key.revoked or not hmac.compare_digest(key.secret_hash, _hash(parts[2], settings)):
        raise Unauthorized("invalid or revoked API key")
    key.last_used_at = utcnow()
    return Principal(id=f"key:{key.id}", role=key.role, key_id=key.id)


def list_keys(session: Session) -> list[ApiKey]:
    return list(session.scalars(select(ApiKey).order_by(ApiKey.id)))


def revoke_key(session: Session, key_id: int) -> bool:
    key = session.get(ApiKey, key_id)
    if key is None:
        return False
    key.revoked = True
    return True
