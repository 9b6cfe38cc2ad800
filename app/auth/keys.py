"""API keys (peppered SHA-256 at rest) and per-audit data-subject tokens (HMAC, nothing stored)."""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import ApiKey, DashboardSession, RevokedSubjectToken
from app.db.models.auth import ROLES, Role
from app.errors import InvalidInput, Unauthorized
from app.settings import Settings

KEY_PREFIX = "mak"
SUBJECT_TOKEN_PREFIX = "mas"
MISSING_KEY = "missing API key: send 'Authorization: Bearer <key>' (create one with `memaudit keys create`)"
CLI_KEY_PREFIX = "cli"  # api_keys.prefix of the command line's row; real keys have 12 hex characters: no clash
CLI_KEY_NAME = "cli"
# The command line's key has no stored secret: its token is valid in this process only (``in_process_token``).
_IN_PROCESS_SECRET = secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Principal:
    """Who is calling. ``audit_scope`` is set for a data-subject token: it reads that audit only."""

    id: str
    role: str
    key_id: int | None = None
    audit_scope: str | None = None

    @property
    def sees_everything(self) -> bool:
        return self.role in (Role.ADMIN, Role.REGULATOR)


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


def ensure_cli_key(session: Session) -> int:
    """The id of the command line's api_keys row (role admin, prefix and name ``cli``), created on first use. Its
    secret hash is empty: only ``in_process_token`` authenticates as it."""
    found = session.scalar(select(ApiKey.id).where(ApiKey.prefix == CLI_KEY_PREFIX))
    if found is not None:
        return found
    try:
        with session.begin_nested():
            key = ApiKey(prefix=CLI_KEY_PREFIX, secret_hash="", role=Role.ADMIN, name=CLI_KEY_NAME)
            session.add(key)
        return key.id
    except IntegrityError:  # another `memaudit` process created it at the same moment
        return session.scalar(select(ApiKey.id).where(ApiKey.prefix == CLI_KEY_PREFIX))


def cli_principal(session: Session) -> Principal:
    """The command line's key as the API authenticates it (``authenticate`` with ``in_process_token``)."""
    key_id = ensure_cli_key(session)
    return Principal(id=f"key:{key_id}", role=Role.ADMIN, key_id=key_id)


def in_process_token() -> str:
    """The bearer token of the command line's key, for requests made in this process (the CLI's local mode calls the
    API in-process: app/cli/client.py). Its secret is drawn when the process starts, kept in memory only, never
    stored or sent over a network: no other process, a served API included, can present it."""
    return f"{KEY_PREFIX}_{CLI_KEY_PREFIX}_{_IN_PROCESS_SECRET}"


def _secret_matches(key: ApiKey, secret: str, settings: Settings) -> bool:
    if key.prefix == CLI_KEY_PREFIX:
        return hmac.compare_digest(secret, _IN_PROCESS_SECRET)
    return hmac.compare_digest(key.secret_hash, _hash(secret, settings))


def subject_token(audit_id: str, settings: Settings) -> str:
    mac = hmac.new(settings.key_pepper.encode(), f"subject:{audit_id}".encode(), hashlib.sha256).hexdigest()
    return f"{SUBJECT_TOKEN_PREFIX}_{audit_id}_{mac[:40]}"


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else authorization.strip()


def authenticate(session: Session, settings: Settings, token: str | None) -> Principal:
    if not token:
        raise Unauthorized(MISSING_KEY)
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
    if key is None or key.revoked or not _secret_matches(key, parts[2], settings):
        raise Unauthorized("invalid or revoked API key")
    return Principal(id=f"key:{key.id}", role=key.role, key_id=key.id)


def principal_for(settings: Settings, token: str) -> Principal:
    """Authenticate in a short transaction of its own (the request's transaction never reads or locks the key's
    row) and record the key's use; raises Unauthorized."""
    with session_scope() as session:
        principal = authenticate(session, settings, token)
        if principal.key_id is not None:
            touch_last_used(session, principal.key_id, settings.key_touch_seconds)
    return principal


_touched: dict[int, float] = {}  # key id -> monotonic time of this process's last update of last_used_at
_touched_lock = threading.Lock()


def touch_last_used(session: Session, key_id: int, every_seconds: float) -> bool:
    """Record that a key was used, coarsely: at most once per ``every_seconds`` per key and process, and never
    waiting on a row lock (a row another request is updating is skipped: that request records the use).
    Run it in its own short transaction, not the request's: a request must not hold the key's row lock."""
    now = time.monotonic()
    with _touched_lock:
        if now - _touched.get(key_id, -math.inf) < every_seconds:
            return False
        _touched[key_id] = now
        if len(_touched) > 10_000:  # bounded: forget the oldest half
            for stale in sorted(_touched, key=_touched.__getitem__)[:5_000]:
                del _touched[stale]
    wall = utcnow()
    free = (
        select(ApiKey.id)
        .where(ApiKey.id == key_id)
        .where(or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at < wall - timedelta(seconds=every_seconds)))
        .with_for_update(skip_locked=True)
    )
    result = session.execute(update(ApiKey).where(ApiKey.id.in_(free)).values(last_used_at=wall))
    return bool(result.rowcount)


def list_keys(session: Session) -> list[ApiKey]:
    return list(session.scalars(select(ApiKey).order_by(ApiKey.id)))


def revoke_key(session: Session, key_id: int) -> bool:
    key = session.get(ApiKey, key_id)
    if key is None:
        return False
    key.revoked = True
    # its dashboard sessions end with it (each request checks the key too; the rows go now, not at expiry)
    session.execute(delete(DashboardSession).where(DashboardSession.key_id == key_id))
    return True


def still_valid(session: Session, principal: Principal) -> bool:
    """A principal authenticated earlier (a dashboard session, an open event stream) still is: its key is not
    revoked and keeps its role; a subject token was not revoked."""
    if principal.audit_scope is not None:
        return session.get(RevokedSubjectToken, principal.audit_scope) is None
    key = session.get(ApiKey, principal.key_id) if principal.key_id is not None else None
    return key is not None and not key.revoked and key.role == principal.role
