"""The dashboard's session: an API key or a data subject's token, checked once by the API's own authentication,
becomes a signed cookie (HttpOnly, SameSite=Strict, Secure outside development and test) that names the principal,
its expiry, a CSRF token and a random session id. The key itself is never stored in the cookie.

The session also lives server-side: a ``ui_sessions`` row (the SHA-256 of the session id) is created at sign-in
and deleted at sign-out, at the key's revocation (or the subject token's) and at expiry; a cookie whose row is
gone is no session, so a cookie replayed after sign-out leads to the sign-in page. Each request re-checks, in one
short transaction, the row and that the key is still valid (not revoked, same role) or the subject token not
revoked. The signature is an HMAC-SHA256 under a key derived from the service's pepper; changing the pepper signs
everybody out."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete

from app.auth import keys
from app.auth.keys import Principal, principal_for
from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import DashboardSession
from app.settings import Settings

COOKIE = "memaudit_ui"
MAX_AGE_SECONDS = 8 * 3600  # a working day; the cookie and the signed payload expire together
CSRF_FIELD = "csrf"


class NotSignedIn(Exception):
    """No cookie, a forged or expired one, or a principal that is no longer valid: the sign-in page."""


class BadCsrf(Exception):
    """A state-changing form without the session's CSRF token: 403, nothing done."""


@dataclass(frozen=True)
class UiSession:
    principal: Principal
    csrf: str
    expires: int
    sid: str = ""  # the server-side session's id (only its SHA-256 is stored)


def _signing_key(settings: Settings) -> bytes:
    return hmac.new(settings.key_pepper.encode(), b"memaudit-ui-session", hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encode(session: UiSession, settings: Settings) -> str:
    p = session.principal
    payload = {
        "id": p.id,
        "role": p.role,
        "key": p.key_id,
        "scope": p.audit_scope,
        "csrf": session.csrf,
        "exp": session.expires,
        "sid": session.sid,
    }
    body = _b64(json.dumps(payload, separators=(",", ":")).encode())
    mac = _b64(hmac.new(_signing_key(settings), body.encode(), hashlib.sha256).digest())
    return f"{body}.{mac}"


def decode(cookie: str | None, settings: Settings, now: float | None = None) -> UiSession:
    """The session in a cookie, or NotSignedIn (a forged, malformed or expired cookie)."""
    if not cookie or len(cookie) > 2000 or cookie.count(".") != 1:
        raise NotSignedIn
    body, mac = cookie.split(".")
    expected = _b64(hmac.new(_signing_key(settings), body.encode(), hashlib.sha256).digest())
    if not hmac.compare_digest(mac.encode(), expected.encode()):  # bytes: a non-ASCII str would raise TypeError
        raise NotSignedIn
    try:
        data = json.loads(_unb64(body))
        principal = Principal(id=data["id"], role=data["role"], key_id=data["key"], audit_scope=data["scope"])
        session = UiSession(principal, str(data["csrf"]), int(data["exp"]), str(data["sid"]))
    except (ValueError, KeyError, TypeError):
        raise NotSignedIn from None
    if session.expires < (now if now is not None else time.time()):
        raise NotSignedIn
    return session


def _row_id(sid: str) -> str:
    return hashlib.sha256(sid.encode()).hexdigest()


def sign_in(settings: Settings, token: str) -> UiSession:
    """Exchange a key or subject token for a session: the API's authentication decides (Unauthorized if bad); the
    session's row is committed before the cookie is sent. Expired rows are deleted on the way (one statement)."""
    principal = principal_for(settings, token.strip())
    ui = UiSession(principal, secrets.token_urlsafe(24), int(time.time()) + MAX_AGE_SECONDS, secrets.token_urlsafe(32))
    with session_scope() as db:
        db.execute(delete(DashboardSession).where(DashboardSession.expires_at < utcnow()))
        db.add(
            DashboardSession(
                id=_row_id(ui.sid),
                principal=principal.id[:64],
                key_id=principal.key_id,
                expires_at=datetime.fromtimestamp(ui.expires, UTC),
            )
        )
    return ui


def sign_out(ui: UiSession) -> None:
    """Delete the session's row: its cookie, replayed, is no session any more."""
    with session_scope() as db:
        db.execute(delete(DashboardSession).where(DashboardSession.id == _row_id(ui.sid)))


def still_valid(ui: UiSession) -> bool:
    """The session's row exists and has not expired, the key behind it is not revoked and keeps its role, and a
    subject token was not revoked."""
    if not ui.sid:
        return False
    with session_scope() as db:
        row = db.get(DashboardSession, _row_id(ui.sid))
        if row is None or row.principal != ui.principal.id[:64]:
            return False
        expires = row.expires_at if row.expires_at.tzinfo else row.expires_at.replace(tzinfo=UTC)  # SQLite: naive
        return expires > utcnow() and keys.still_valid(db, ui.principal)


def check_csrf(session: UiSession, sent: str | None) -> None:
    if not sent or not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        raise BadCsrf


SIGNIN_COOKIE = "memaudit_ui_signin"
SIGNIN_MAX_AGE_SECONDS = 3600  # how long an open sign-in page stays usable


def new_signin_token() -> str:
    return secrets.token_urlsafe(24)


def signin_token_matches(cookie: str | None, sent: str | None) -> bool:
    """The sign-in form's token equals its cookie's (both present): the form came from our own sign-in page."""
    if not cookie or not sent or len(cookie) > 200:
        return False
    return hmac.compare_digest(cookie.encode(), sent.encode())


def signin_cookie_flags(settings: Settings) -> dict[str, object]:
    return cookie_flags(settings) | {"max_age": SIGNIN_MAX_AGE_SECONDS}


def cookie_flags(settings: Settings) -> dict[str, object]:
    """HttpOnly, SameSite=Strict, path /ui; Secure wherever the service runs behind TLS (not on loopback tests)."""
    return {
        "httponly": True,
        "samesite": "strict",
        "path": "/ui",
        "max_age": MAX_AGE_SECONDS,
        "secure": settings.env == "production",
    }
