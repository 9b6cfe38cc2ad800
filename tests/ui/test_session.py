"""The dashboard's session cookie without a browser: it round-trips, and a tampered, expired or foreign cookie is
no session; the CSRF check refuses a missing or different token."""

from __future__ import annotations

import time

import pytest

from app.auth.keys import Principal
from app.settings import Settings
from app.ui.session import BadCsrf, NotSignedIn, UiSession, check_csrf, decode, encode

SETTINGS = Settings(key_pepper="a-long-enough-test-pepper-1234")
SESSION = UiSession(Principal(id="key:7", role="regulator", key_id=7), csrf="c" * 32, expires=int(time.time()) + 86_400)


def test_a_cookie_round_trips_and_carries_no_key() -> None:
    cookie = encode(SESSION, SETTINGS)
    assert decode(cookie, SETTINGS) == SESSION and "mak_" not in cookie


@pytest.mark.parametrize(
    "cookie",
    [
        None,
        "",
        "garbage",
        encode(SESSION, SETTINGS)[:-2] + "xx",  # a forged signature
        encode(SESSION, SETTINGS).replace(".", "x.", 1),  # a changed payload under the old signature
        encode(SESSION, Settings(key_pepper="another-pepper-of-enough-length")),  # signed with another secret
        "a" * 3000 + ".b",  # oversized
    ],
)
def test_a_tampered_or_foreign_cookie_is_no_session(cookie: str | None) -> None:
    with pytest.raises(NotSignedIn):
        decode(cookie, SETTINGS)


def test_an_expired_cookie_is_no_session() -> None:
    cookie = encode(SESSION, SETTINGS)
    with pytest.raises(NotSignedIn):
        decode(cookie, SETTINGS, now=SESSION.expires + 1)


def test_csrf_needs_the_sessions_own_token() -> None:
    check_csrf(SESSION, "c" * 32)
    for sent in (None, "", "c" * 31, "d" * 32):
        with pytest.raises(BadCsrf):
            check_csrf(SESSION, sent)
