"""A running null makes way for a single audit, on a real `memaudit worker` (Redis, Postgres) and on the embedded
runner: the single audit submitted while a null runs finishes before the null, the null goes back to `queued`
(not counted as an attempt), the reconciler enqueues it again, and its rerun reads what it had scored from the NLL
cache and ends with the null facts an uninterrupted run stores."""

from __future__ import annotations

import json
import signal
import time

from sqlalchemy import select

from app.db.engine import session_scope
from app.db.models import Audit
from tests.conftest import REPO, wait_for

MANIFEST = REPO / "workers" / "groundtruth" / "manifest.json"
MODEL = "groundtruth-tiny"
# a null that runs for tens of seconds on the ground-truth model (a full null of 150 fictitious people), and a
# single audit that takes a few
NULL = {
    "kind": "null",
    "model": MODEL,
    "properties": ["P27"],
    "method": "full",
    "facts_per_property": 150,
    "options": {"paraphrases": 2, "counterfactuals": 40, "near_duplicates": False},
}
SINGLE_OPTIONS = {"paraphrases": 1, "counterfactuals": 8, "similar_names": 1, "near_duplicates": False}


def single(person: dict) -> dict:
    facts = [{"property": "P27", "value": person["facts"]["P27"][0]}]
    return {
        "kind": "subject",
        "model": MODEL,
        "options": SINGLE_OPTIONS,
        "subject": {"name": person["name"], "facts": facts},
    }


def attempts(audit_id: str) -> int:
    with session_scope() as s:
        return s.scalar(select(Audit.attempts).where(Audit.id == audit_id))


def running_with_progress(admin, audit_id: str, timeout: float = 300) -> int:
    """Wait until the null has scored a fifth of its sentences; returns how many it has."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = admin.get(f"/audits/{audit_id}").json()
        assert body["status"] in ("queued", "running"), body
        done, total = body["progress"]["done"], body["progress"]["total"]
        if body["status"] == "running" and total and done >= total / 5:
            return done
        time.sleep(0.1)
    raise AssertionError(f"the null did not score a fifth of its sentences in {timeout} s")


def make_way(api_factory, start_worker=None) -> dict:
    """Submit the null (then ``start_worker()``, if given), then a single audit once the null scores; returns the
    finished null's body."""
    admin, auditor = api_factory("admin"), api_factory("auditor")
    null = admin.post("/audits", json=NULL)
    assert null.status_code == 202, null.text
    null_id = null.json()["id"]
    if start_worker is not None:
        start_worker()
    scored_first = running_with_progress(admin, null_id)
    person = json.loads(MANIFEST.read_text())["trained"][0]
    submitted = auditor.post("/audits", json=single(person))
    assert submitted.status_code == 202, submitted.text
    done = wait_for(auditor, submitted.json()["id"], timeout=120)
    assert done["status"] == "succeeded", done
    meanwhile = admin.get(f"/audits/{null_id}").json()
    assert meanwhile["status"] in ("queued", "running"), f"the null ran to its end first: {meanwhile}"
    finished = wait_for(admin, null_id, timeout=600)
    assert finished["status"] == "succeeded", finished
    assert attempts(null_id) == 1  # making way is not an attempt
    # The rerun reads back from the NLL cache what the first run scored (all but the engine chunk it stopped in).
    # An uninterrupted run also reads some (2,292 of 58,101: sentences repeated across its chunks of people), so
    # the bound is the first run's share: at least half of the sentences it had scored when the audit came.
    cost = finished["summary"]["cost"]
    assert cost["cached"] >= scored_first / 2, f"the rerun scored again what it had ({scored_first}): {cost}"
    assert finished["summary"]["null_facts"] == 150
    return finished


def test_a_running_null_makes_way_for_a_single_audit_on_a_worker(rq_worker, api_factory, worker_log):
    null = make_way(api_factory)
    assert f"audit {null['id']} (background) makes way for a waiting single audit" in worker_log.read_text()


def test_a_running_null_makes_way_on_the_embedded_runner(sqlite_env, api_factory):
    make_way(api_factory)


def test_a_burst_worker_runs_the_null_that_made_way_before_it_exits(rq_worker_later, api_factory, worker_log):
    """`memaudit worker --burst` empties the queues, then reconciles: the null that made way is `queued` with its
    job ended, so the worker enqueues it again and runs it before exiting (it used to exit and strand it)."""
    workers = []
    null = make_way(api_factory, lambda: workers.append(rq_worker_later("--burst")))
    assert f"audit {null['id']} (background) makes way for a waiting single audit" in worker_log.read_text()
    assert workers[0].wait(timeout=60) == 0  # a burst worker that ran out of work exits 0 (it exited 1)


def test_a_burst_worker_stops_on_sigterm_and_starts_nothing_more(rq_worker_later, api_factory, worker_log):
    """SIGTERM to `memaudit worker --burst` mid-job: the job ends (RQ's warm shutdown) and the worker exits 0,
    without the reconciling round that would find more to run (it went on into another work loop)."""
    from app.queue import get_dispatcher

    admin = api_factory("admin")
    first, lost = (admin.post("/audits", json={**NULL, "facts_per_property": n}) for n in (150, 149))
    assert first.status_code == lost.status_code == 202, (first.text, lost.text)
    worker = rq_worker_later("--burst")
    running_with_progress(admin, first.json()["id"])
    lost_id = lost.json()["id"]
    assert get_dispatcher().discard([lost_id]) == 1  # Redis lost its job: the next reconcile would enqueue it
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=300) == 0
    log = worker_log.read_text()
    assert "Traceback" not in log, log[-3000:]
    assert admin.get(f"/audits/{lost_id}").json()["status"] == "queued", "the stopping worker ran another audit"
