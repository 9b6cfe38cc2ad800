"""An audit in mode generation says so on its dashboard page: how it asked, what the answers were and what the audit
cost (issue 41)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import Api, make_key, wait_for
from tests.support.ui import sign_in


def test_the_audit_page_says_the_mode_the_answers_and_the_cost(sqlite_env):
    key = make_key("auditor")
    browser = TestClient(create_app())
    api = Api(key)
    api.client = browser
    body = {
        "kind": "subject",
        "model": "knowledge-free",
        "subject": {"name": "Ann Example", "facts": [{"property": "P106", "value": "chemist"}]},
        "options": {"mode": "generation", "generation": {"samples": 6}},
    }
    created = api.post("/audits", json=body)
    assert created.status_code == 202, created.text
    done = wait_for(api, created.json()["id"], timeout=120)
    assert done["status"] == "succeeded", done
    usage = done["summary"]["generation"]["usage"]
    assert sign_in(browser, key).status_code == 303
    page = browser.get(f"/ui/audits/{done['id']}").text
    assert "Probed by generation" in page and "answered\n6 times" in page, page
    assert f"{usage['queries']} queries" in page and f"{usage['completion_tokens']} generated tokens" in page
    assert "occupation: " in page and " of 6 answers give a true value" in page
    reply = browser.get(f"/ui/audits/{done['id']}/reply").text
    assert "We asked the model about each fact 6 times" in reply and f"{usage['queries']} questions" in reply


def test_the_submit_form_offers_the_mode_and_sends_how_generation_asks(sqlite_env):
    import re

    key = make_key("auditor")
    browser = TestClient(create_app())
    assert sign_in(browser, key).status_code == 303
    page = browser.get("/ui/submit").text
    assert 'id="option_mode"' in page and 'name="option_generation_samples" value="10"' in page
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    form = {"csrf": csrf, "model": "knowledge-free", "name": "Ann Example", "facts": "P106 = chemist"}
    sent = browser.post("/ui/submit", data=form | {"option_mode": "generation", "option_generation_samples": "3"})
    assert sent.status_code == 200 and "audit-link" in sent.text, sent.text[:500]
    scored = browser.post("/ui/submit", data=form | {"option_generation_samples": "3"})  # mode scoring: not sent
    assert scored.status_code == 200 and "audit-link" in scored.text
    api = Api(key)
    api.client = browser
    listed = sorted(api.get("/audits").json()["items"], key=lambda a: a["created_at"])
    assert listed[0]["options"]["mode"] == "generation" and listed[0]["options"]["generation"]["samples"] == 3
    assert "mode" not in listed[1]["options"] and "generation" not in listed[1]["options"]
