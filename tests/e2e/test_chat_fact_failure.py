"""A chat endpoint that fails on one fact's prompt (issue 41): through the service (HTTP API -> Postgres -> Redis ->
a real RQ worker process -> a loopback endpoint that answers like an OpenAI-compatible one and fails on cue,
tests/support/fake_chat.py), the audit in generation mode keeps every fact the endpoint answered, and the one it
failed on says why (the endpoint's error, after the retries) with no verdict: nothing else is lost."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import wait_for
from tests.support.fake_chat import FakeChat

pytestmark = pytest.mark.slow

SUBJECT = {
    "name": "Ottilie Brenner",
    "facts": [
        {"property": "P27", "value": "Austria"},
        {"property": "P19", "value": "Vienna"},
        {"property": "P1412", "value": "German"},
    ],
}


@pytest.fixture
def endpoint():
    server = FakeChat()
    yield server
    server.stop()


@pytest.fixture
def flaky_env(pg_env, endpoint, monkeypatch):
    """The flaky model registered (one request at a time, no retries) and small nulls."""
    model = {"backend": "openai-chat", "base_url": endpoint.url, "served_model": "m", "retries": 0, "concurrency": 1}
    monkeypatch.setenv("MEMAUDIT_MODELS", json.dumps({"flaky": model}))
    for name, value in (("NULL_FACTS_PER_PROPERTY", "1"), ("NULL_MIN_PEOPLE", "1"), ("NULL_MAX_PEOPLE", "1")):
        monkeypatch.setenv(f"MEMAUDIT_{name}", value)
    from app.settings import get_settings

    get_settings.cache_clear()


@pytest.fixture
def worker(flaky_env, rq_worker):
    """The RQ worker, started after flaky_env so that its environment holds the flaky model."""
    return rq_worker


def settled_facts(api, audit_id: str, timeout: float = 600) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        facts = api.get(f"/audits/{audit_id}/facts").json()["facts"]
        if all(f["calibration"]["status"] != "pending" for f in facts) or time.monotonic() > deadline:
            return facts
        time.sleep(1)


def test_a_fact_the_endpoint_fails_on_loses_no_other_fact(worker, endpoint, api_factory):
    api = api_factory("auditor")
    endpoint.fail_asking = ("Ottilie", "born")  # every request asking where she was born answers 500
    body = {"kind": "subject", "model": "flaky", "subject": SUBJECT, "options": {"seed": 0, "mode": "generation"}}
    r = api.post("/audits", json=body)
    assert r.status_code == 202, r.text
    done = wait_for(api, r.json()["id"], timeout=600)
    assert done["status"] == "succeeded", (done.get("error"), endpoint.requests[:6])
    assert done["summary"]["facts_failed"] == 1, done["summary"]
    facts = settled_facts(api, done["id"])
    failed = [f for f in facts if f["answers"]["error"]]
    answered = [f for f in facts if not f["answers"]["error"]]
    assert len(failed) == 1 and len(answered) == 2, facts
    reason = failed[0]["answers"]["error"]
    assert "/chat/completions" in reason and "500" in reason, reason
    assert failed[0]["calibration"]["status"] == "uncalibrated", failed[0]["calibration"]
    assert "could not be asked" in failed[0]["calibration"]["message"], failed[0]["calibration"]
    assert failed[0]["answers"]["prompts"] and not failed[0]["answers"]["prompts"][0]["samples"]
    for fact in answered:  # answered, read, and judged by the null asked the same way
        samples = [s for p in fact["answers"]["prompts"] for s in p["samples"]]
        assert len(samples) == fact["answers"]["options"]["samples"], fact["answers"]
        assert fact["calibration"]["status"] in {"ready", "uncalibrated"}, fact["calibration"]
        assert "could not be asked" not in (fact["calibration"].get("message") or "")
    assert "Ottilie" not in reason  # the reason names the endpoint's error, never the prompt
