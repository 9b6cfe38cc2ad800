"""The dashboard's session cookie without a browser: it round-trips, and a tampered, expired or foreign cookie is
no session; the CSRF check refuses a missing or different token."""

from __future__ import annotations

import time

import pytest

from app.auth.keys import Principal
from app.settings import Settings
from app.ui.session import BadCsrf, NotSignedIn, UiSession, check_csrf, decode, encode
from tests.support.ui import sign_in

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


def test_hostile_dashboard_input_is_a_4xx_page_never_a_500(sqlite_env) -> None:
    """Found in review, each a 500 before: a cookie with a non-ASCII byte, the last date there is as the list's end
    date, a form number nested 50,000 deep; and a sign-in body past the dashboard's form limit is refused before
    it is read (the sign-in form is read before anyone is authenticated)."""
    import re

    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.middleware import UI_MAX_BODY_BYTES
    from tests.conftest import make_key

    key = make_key("auditor")
    with TestClient(create_app(), raise_server_exceptions=False) as browser:
        raw_cookie = [(b"cookie", "memaudit_ui=a.\xe9".encode("latin-1"))]  # a byte no cookie jar would send
        r = browser.get("/ui/audits", headers=raw_cookie, follow_redirects=False)
        assert r.status_code == 303 and "/ui/signin" in r.headers["location"]
        assert sign_in(browser, key).status_code == 303
        assert browser.get("/ui/audits?created_to=9999-12-31").status_code == 200
        csrf = re.search(r'name="csrf" value="([^"]+)"', browser.get("/ui/submit").text).group(1)
        form = {
            "csrf": csrf,
            "model": "groundtruth-tiny",
            "name": "Ada Lovelace",
            "facts": "P106 = mathematician",
            "option_counterfactuals": "[" * 50_000,
        }
        r = browser.post("/ui/submit", data=form)
        assert r.status_code == 422 and "counterfactuals" in r.text
        r = browser.post(
            "/ui/signin",
            content=b"token=" + b"a" * (UI_MAX_BODY_BYTES + 1),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert r.status_code == 413


def test_signing_in_needs_the_sign_in_pages_own_token(sqlite_env) -> None:
    """Login CSRF: a sign-in form posted from another site (no sign-in cookie, or a token of its own) signs nobody
    in, so a victim's browser cannot be signed into the attacker's key; the page says to sign in again."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.conftest import make_key

    key = make_key("auditor")
    with TestClient(create_app()) as attacker_page:
        r = attacker_page.post("/ui/signin", data={"token": key}, follow_redirects=False)  # no token at all
        assert r.status_code == 403 and "another site" in r.text and "memaudit_ui" not in attacker_page.cookies
        r = attacker_page.post("/ui/signin", data={"token": key, "csrf": "forged"}, follow_redirects=False)
        assert r.status_code == 403 and "memaudit_ui" not in attacker_page.cookies
    with TestClient(create_app()) as victim:
        victim.get("/ui/signin")  # the victim's own sign-in cookie, but the attacker's form cannot know its value
        r = victim.post("/ui/signin", data={"token": key, "csrf": "forged"}, follow_redirects=False)
        assert r.status_code == 403 and "memaudit_ui" not in victim.cookies
        assert sign_in(victim, key).status_code == 303 and "memaudit_ui" in victim.cookies
        assert "memaudit_ui_signin" not in victim.cookies  # used up


def _csrf_of(page: str) -> str:
    import re

    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


def test_a_cookie_replayed_after_sign_out_leads_to_sign_in(sqlite_env) -> None:
    """The probe: the cookie replayed after sign-out still listed audits and submitted new ones (sessions were
    stateless). Sign-out deletes the session's row: the same cookie now leads to the sign-in page, and cannot
    submit."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.conftest import make_key

    key = make_key("auditor")
    with TestClient(create_app()) as browser:
        assert sign_in(browser, key).status_code == 303
        cookie = browser.cookies["memaudit_ui"]
        page = browser.get("/ui/submit")
        assert page.status_code == 200
        csrf = _csrf_of(page.text)
        assert browser.post("/ui/signout", data={"csrf": csrf}, follow_redirects=False).status_code == 303
    with TestClient(create_app()) as replay:
        replay.cookies.set("memaudit_ui", cookie, path="/ui")
        r = replay.get("/ui/audits", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/signin")
        r = replay.post("/ui/submit", data={"csrf": csrf, "name": "Replay Person", "facts": "P106 = physicist"})
        assert r.status_code in (303, 200) and "signin" in str(r.url) + r.headers.get("location", "")
        assert "Replay Person" not in r.text


def test_revoking_a_key_deletes_its_sessions(sqlite_env) -> None:
    from fastapi.testclient import TestClient
    from sqlalchemy import func, select

    from app.auth.keys import authenticate, revoke_key
    from app.db.engine import session_scope
    from app.db.models import DashboardSession
    from app.main import create_app
    from app.settings import get_settings
    from tests.conftest import make_key

    key = make_key("auditor")
    with session_scope() as s:
        key_id = authenticate(s, get_settings(), key).key_id

    def rows() -> int:
        with session_scope() as s:
            return s.scalar(select(func.count()).where(DashboardSession.key_id == key_id))

    with TestClient(create_app()) as browser:
        assert sign_in(browser, key).status_code == 303
        assert sign_in(browser, key).status_code == 303  # a second browser tab's sign-in: a second session
        assert rows() == 2
        with session_scope() as s:
            assert revoke_key(s, key_id)
        assert rows() == 0
        r = browser.get("/ui/audits", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/signin")


def test_the_menu_offers_each_role_what_its_role_may_open(sqlite_env) -> None:
    """The menu's role lists are the routes' own (app/deps.py: SUBMITTERS, BATCH_READERS), not spelled in the
    template: each role sees Submit and Batches exactly when its role may open them."""
    from fastapi.testclient import TestClient

    from app.db.vocabulary import Role
    from app.deps import BATCH_READERS, SUBMITTERS
    from app.main import create_app
    from tests.conftest import make_key

    for role in Role:
        with TestClient(create_app()) as browser:
            assert sign_in(browser, make_key(role)).status_code == 303
            menu = browser.get("/ui/audits").text.split('<nav aria-label="main">', 1)[1].split("</nav>", 1)[0]
            assert ("/ui/submit" in menu) == (role in SUBMITTERS), (role, menu)
            assert ("/ui/batches" in menu) == (role in BATCH_READERS), (role, menu)
            assert "/ui/forget-set" in menu, (role, menu)
            if role in SUBMITTERS:
                assert browser.get("/ui/submit").status_code == 200, role
