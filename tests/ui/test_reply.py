"""The reply a person can read (app/ui/reply.py), in chromium against a live API and a real worker on Postgres: a
trained person's audit on the ground-truth model at the API's default options, so that its null is the one shipped
with memaudit (app/nulls/shipped/: 200 null facts per property, p <= 0.01 can be reached; computing one took a minute
of the worker), a forget set delivered. The data subject signs in with their token and reads, in plain words, which
facts the model gives away with an example sentence each, how often the test is wrong, what was sent for
removal and that no check has been made yet. No jargon; Flesch reading ease >= 50 (textstat); printable (the
dashboard's header and footer disappear on paper). The auditor reaches it from the subject audit page; another
auditor and another person's token get a 404. One test: setting up a worker, an API and the audit.

Screenshots go to a temporary directory, or to ``$UI_SCREENSHOTS`` (``UI_SCREENSHOTS=docs/img``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import make_key, wait_for
from tests.support.faults import person, subject_body

MANIFEST = Path(__file__).resolve().parents[2] / "workers" / "groundtruth" / "manifest.json"
HELD_OUT = 0  # a held-out person none of whose facts the shipped null lets through at p <= 0.01
READING_EASE_FLOOR = 50  # Flesch: 60-70 is plain English; 50 is "fairly difficult", the floor we hold
JARGON = ("z*", "z̄", "lenient", "strict", "p-value", "p =", "null", "FPR", "false-positive", "canary", "template")


def audit_body(i: int) -> dict:
    """Trained person ``i``'s subject audit at the API's default options: the configuration of the null shipped for
    the ground-truth model, imported at submission instead of computed (a minute of the worker with 100 null facts)."""
    return {**subject_body(i), "options": {}}


def sign_in(browser, base_url: str, token: str, path: str):  # noqa: ANN001, ANN201
    context = browser.new_context(base_url=base_url, viewport={"width": 1000, "height": 1100})
    page = context.new_page()
    page.goto(path)
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_load_state()
    return page


def wait_calibrated(api, audit_id: str, timeout: float = 600) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        facts = api.get(f"/audits/{audit_id}/facts").json()["facts"]
        if all((f.get("calibration") or {}).get("status") == "ready" for f in facts):
            return facts
        time.sleep(2)
    raise AssertionError(f"the null of audit {audit_id} was not ready in {timeout} s")


@pytest.fixture
def finished(pg_env, rq_worker_later, live_api, monkeypatch, tmp_path):  # noqa: ANN001, ANN201
    monkeypatch.setenv("MEMAUDIT_EVIDENCE_KEY_FILE", str(tmp_path / "evidence.pem"))
    rq_worker_later()  # its own database (pg_env follows), then the API on it
    api = live_api()
    auditor = api.client(make_key("auditor"))
    created = auditor.post("/audits", json=audit_body(0))
    assert created.status_code == 202, created.text
    audit = created.json()
    assert wait_for(auditor, audit["id"], timeout=600)["status"] == "succeeded"
    facts = wait_calibrated(auditor, audit["id"])
    nulls = auditor.get(f"/audits/{audit['id']}/facts").json()["calibration"]["nulls"]
    assert {n["source"] for n in nulls} == {"shipped"}, nulls  # p <= 0.01 needs at least 99 null facts: 200 here
    pipeline = api.client(make_key("pipeline"))
    delivered = pipeline.get("/forget-set", params={"audit_id": audit["id"]})
    assert delivered.status_code == 200
    records = [json.loads(line) for line in delivered.text.splitlines()[:-1]]
    assert records, "the default verdict selected nothing: the page's main promise would go untested"
    return {"api": api, "auditor": auditor, "audit": audit, "facts": facts, "records": records}


def test_the_person_reads_in_plain_words_and_only_they_and_their_auditor_can(finished, browser, tmp_path) -> None:  # noqa: ANN001
    import textstat
    from PIL import Image

    api, audit, who = finished["api"], finished["audit"], person(0)
    page = sign_in(browser, api.url, audit["subject_token"], f"/ui/audits/{audit['id']}/reply")
    assert page.url.endswith(f"/ui/audits/{audit['id']}/reply")
    assert who["name"] in page.inner_text("h1")

    found = page.locator("ul.found li")
    selected = {r["property_label"] for r in finished["records"]}
    assert found.count() == len(selected) >= 1
    for i in range(found.count()):
        item = found.nth(i).inner_text()
        example = found.nth(i).locator("q").inner_text()
        assert who["name"] in example, "the example sentence is about the person"
        assert any(v in example for values in who["facts"].values() for v in values), "and holds the true value"
        assert any(label.lower() in item.lower() for label in selected)

    words = page.inner_text("main")
    for term in JARGON:
        assert term.lower() not in words.lower(), f"jargon on the person's page: {term!r}"
    assert "made-up people" in words and "wrong" in words, "how sure the tool is, in words"
    assert " was sent to " not in words.replace("What was sent to be removed", ""), (
        "an export (a download) is never said to be sent: only a delivery is"
    )
    assert "Nothing has been sent to be removed yet" in words
    assert "No one has checked yet" in words, "no verification yet: the placeholder says so"
    ease = textstat.flesch_reading_ease(words)
    print(f"reading ease of the person's page: {ease:.1f}")
    assert ease >= READING_EASE_FLOOR, f"Flesch reading ease {ease:.1f} < {READING_EASE_FLOOR}: {words}"

    shots = Path(os.environ.get("UI_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "reply.png"), full_page=True)
    Image.open(shots / "reply.png").convert("RGB").quantize(colors=128).save(shots / "reply.png", optimize=True)
    page.emulate_media(media="print")
    assert not page.locator("header").is_visible() and not page.locator("footer").is_visible()
    assert not page.locator(".back").is_visible() and page.locator("ul.found").is_visible()
    page.context.close()

    # the auditor who asked reaches it from the subject audit page; nobody else reaches it
    page = sign_in(browser, api.url, make_key("auditor"), "/ui/audits")
    assert page.goto(f"/ui/audits/{audit['id']}/reply").status == 404, "another auditor's audit"
    page.context.close()

    other = finished["auditor"].post("/audits", json=audit_body(1)).json()
    stranger = sign_in(browser, api.url, other["subject_token"], "/ui/audits")
    assert stranger.goto(f"/ui/audits/{audit['id']}/reply").status == 404, "another person's page"
    assert person(0)["name"] not in stranger.content()
    assert stranger.goto(f"/ui/audits/{other['id']}/reply").status == 200, "their own page, even unfinished"
    stranger.context.close()

    token = finished["auditor"].headers["Authorization"].split()[1]
    own = sign_in(browser, api.url, token, f"/ui/audits/{audit['id']}")
    own.click("text=A report in plain words")
    own.wait_for_load_state()
    assert own.url.endswith(f"/ui/audits/{audit['id']}/reply")
    assert own.locator("ul.found li").count() >= 1
    own.context.close()

    # every read path wrote its access-log entry, by id only: the API's facts reads (the fixture's polls), the
    # export, the dashboard's audit page and the reply (the subject's and the auditor's)
    from sqlalchemy import select

    from app.db.engine import session_scope
    from app.db.models import AccessLog

    with session_scope() as s:
        logged = {(r.role, r.action) for r in s.scalars(select(AccessLog).where(AccessLog.audit_id == audit["id"]))}
    assert {("auditor", "read_facts"), ("pipeline", "export_forget_set"), ("subject", "read_facts")} <= logged


def held_out_body(i: int) -> dict:
    """Held-out person ``i`` of the ground-truth model (never trained on) at the API's default options: the shipped
    null judges them, and at p <= 0.01 none of their facts is memorized."""
    p = json.loads(MANIFEST.read_text())["held_out"][i]
    facts = [{"property": pid, "value": v} for pid, values in p["facts"].items() for v in values]
    return {"kind": "subject", "model": "groundtruth-tiny", "subject": {"name": p["name"], "facts": facts}}


def test_a_person_with_nothing_found_reads_what_a_no_is_worth(pg_env, rq_worker_later, live_api, browser) -> None:  # noqa: ANN001
    """No memorized fact: the page says the test found none, that not found is not absent, how often the test
    misses a fact (the measured recall, app.subjects.detection), and gives no advice to have anything removed."""
    from app.migrate import import_shipped_nulls
    from app.subjects.detection import miss_words

    rq_worker_later()
    assert "groundtruth-tiny" in import_shipped_nulls()  # as `memaudit migrate` does: not inside the first request
    api = live_api()
    auditor = api.client(make_key("auditor"))
    created = auditor.post("/audits", json=held_out_body(HELD_OUT))
    assert created.status_code == 202, created.text
    audit = created.json()
    assert wait_for(auditor, audit["id"], timeout=600)["status"] == "succeeded"
    facts = wait_calibrated(auditor, audit["id"])
    assert not [f["label"] for f in facts if f["calibration"]["memorized"]], "a held-out person's fact was memorized"

    page = sign_in(browser, api.url, audit["subject_token"], f"/ui/audits/{audit['id']}/reply")
    words = " ".join(page.inner_text("main").split())
    assert page.locator("ul.found li").count() == 0
    assert "The test found no fact that the model gives away" in words
    assert " ".join(miss_words("groundtruth-tiny").split()) in words, "the miss rate, in words"
    assert "does not show that the model does not know" in words
    advice = " ".join(page.inner_text("section[aria-labelledby=next]").split())
    assert "nothing to remove" in advice and "ask the firm" not in advice.lower(), advice
    assert "gives away these facts" not in words and "did not give away" not in words, "not found is not absent"
    for term in JARGON:
        assert term.lower() not in words.lower(), f"jargon on the person's page: {term!r}"
    page.context.close()
