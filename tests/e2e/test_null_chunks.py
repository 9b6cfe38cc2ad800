"""A null runs as small jobs on the background lane, on a real `memaudit worker` (Redis, Postgres) and on the
embedded runner: a single audit submitted while a null runs starts within one chunk's time (measured here), the
null goes on to its end with every fictitious person stored once, and a burst worker runs a whole null and exits."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime

import pytest
from sqlalchemy import distinct, func, select

from app.db.engine import session_scope
from app.db.models import Audit, NullDistribution, NullFact
from tests.conftest import REPO, wait_for

MANIFEST = REPO / "workers" / "groundtruth" / "manifest.json"
MODEL = "groundtruth-tiny"
# a null of 60 fictitious people on the ground-truth model (492 sentences each: 4 people per 2,000-sentence job, so
# 15 chunks). The tests stop it or submit beside it after its third chunk and its next boundary (about 5-6 chunks
# in): 60 leaves some 9 chunks to run after that (150 left 30) at 40 % of the scoring (the file: 571 s at load 5-8)
PEOPLE = 60
NULL = {
    "kind": "null",
    "model": MODEL,
    "properties": ["P27"],
    "method": "full",
    "facts_per_property": PEOPLE,
    "options": {"paraphrases": 2, "counterfactuals": 40, "near_duplicates": False},
}
SINGLE_OPTIONS = {"paraphrases": 1, "counterfactuals": 8, "similar_names": 1, "near_duplicates": False}


@pytest.fixture(autouse=True)
def small_subject_nulls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The single audits' own null (P27 under SINGLE_OPTIONS, created by the warm-up audit's submission; the measured
    single audit shares it) at 20 people (the least), one chunk, instead of the default 200 (some 5 chunks that took
    turns with the test's null on the lane until it ended, a third more scoring in the two single-audit tests). The
    test's null sets its own size (``facts_per_property``). Set before ``pg_env`` / ``sqlite_env`` clear the
    cached settings."""
    monkeypatch.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", "20")


def single(person: dict) -> dict:
    facts = [{"property": "P27", "value": person["facts"]["P27"][0]}]
    return {
        "kind": "subject",
        "model": MODEL,
        "options": SINGLE_OPTIONS,
        "subject": {"name": person["name"], "facts": facts},
    }


def stored_people(null_id: str) -> int:
    with session_scope() as s:
        stmt = (
            select(func.count(distinct(NullFact.person)))
            .join(NullDistribution, NullDistribution.id == NullFact.distribution_id)
            .where(NullDistribution.audit_id == null_id)
        )
        return s.scalar(stmt) or 0


def chunk_seconds(null_id: str, timeout: float = 300) -> float:
    """The time between two stored chunks of the null (after its first, which loads the model)."""
    deadline, marks, last = time.monotonic() + timeout, [], stored_people(null_id)
    while time.monotonic() < deadline and len(marks) < 3:
        now = stored_people(null_id)
        if now != last:
            marks.append(time.monotonic())
            last = now
        time.sleep(0.02)
    assert len(marks) == 3, f"the null stored fewer than 3 chunks in {timeout} s"
    return max(marks[2] - marks[1], marks[1] - marks[0])


def started_after(audit_id: str, submitted: datetime) -> float:
    with session_scope() as s:
        started = s.scalar(select(Audit.started_at).where(Audit.id == audit_id))
    return (started.replace(tzinfo=None) - submitted.replace(tzinfo=None)).total_seconds()


def stored_facts() -> int:
    with session_scope() as s:
        return s.scalar(select(func.count(NullFact.id))) or 0


class ChunkWatch:
    """Records when any null stores a chunk (the null facts stored change), from a thread, while the test goes on:
    the warm-up audit's own null (one chunk) may take a turn with the test's on the lane."""

    def __init__(self) -> None:
        self.marks, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        last = stored_facts()
        while not self.stop.is_set():
            now = stored_facts()
            if now != last:
                self.marks.append(time.monotonic())
                last = now
            time.sleep(0.02)

    def wait_for_mark(self, after: float, timeout: float = 120.0) -> None:
        """Until a chunk is stored later than ``after`` (a loaded machine stretches a chunk past any fixed sleep)."""
        deadline = time.monotonic() + timeout
        while not any(m > after for m in self.marks):
            assert time.monotonic() < deadline, f"no null chunk stored within {timeout:.0f} s"
            time.sleep(0.05)

    def around(self, moment: float) -> float:
        """The duration of the chunk that was running at ``moment``."""
        before = [m for m in self.marks if m <= moment]
        after = [m for m in self.marks if m > moment]
        assert before and after, "no chunk boundary on both sides of the submission"
        return after[0] - before[-1]

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def single_waits_at_most_a_chunk(api_factory, start_worker=None) -> dict:
    from app.db.base import utcnow

    admin, auditor = api_factory("admin"), api_factory("auditor")
    people = json.loads(MANIFEST.read_text())["trained"]
    # a warm worker: one subject audit first (the first one imports the subject job's modules, ~1 s, once)
    warm = auditor.post("/audits", json=single(people[1]))
    assert warm.status_code == 202 and wait_for(auditor, warm.json()["id"], timeout=300)["status"] == "succeeded"
    null = admin.post("/audits", json=NULL)
    assert null.status_code == 202, null.text
    null_id = null.json()["id"]
    if start_worker is not None:
        start_worker()
    chunk_seconds(null_id)  # the null runs
    watch = ChunkWatch()
    watch.wait_for_mark(after=0.0)  # a chunk boundary before the submission
    person = people[0]
    submitted_at, submitted_mono = utcnow(), time.monotonic()
    submitted = auditor.post("/audits", json=single(person))
    assert submitted.status_code == 202, submitted.text
    done = wait_for(auditor, submitted.json()["id"], timeout=120)
    assert done["status"] == "succeeded", done
    watch.wait_for_mark(after=submitted_mono)  # the next chunk boundary
    watch.close()
    chunk = watch.around(submitted_mono)
    waited = started_after(done["id"], submitted_at)
    # it waited for the chunk in progress (its own null, the warm-up audit's, is done or waits behind it on the lane)
    message = f"the single audit waited {waited:.2f} s for a worker; the chunk in progress took {chunk:.2f} s"
    print(message)
    assert waited <= chunk + 1.0, message
    meanwhile = admin.get(f"/audits/{null_id}").json()
    assert meanwhile["status"] in ("queued", "running"), f"the null ran to its end first: {meanwhile}"
    finished = wait_for(admin, null_id, timeout=900)
    assert finished["status"] == "succeeded", finished
    assert finished["summary"]["null_facts"] == PEOPLE and stored_people(null_id) == PEOPLE
    with session_scope() as s:
        assert s.scalar(select(Audit.attempts).where(Audit.id == null_id)) == 1, "a chunk counted as an attempt"
    return finished


def test_a_single_audit_waits_at_most_one_null_chunk_on_a_worker(rq_worker, api_factory):
    single_waits_at_most_a_chunk(api_factory)


def test_a_single_audit_waits_at_most_one_null_chunk_on_the_embedded_runner(sqlite_env, api_factory):
    single_waits_at_most_a_chunk(api_factory)


def test_a_burst_worker_runs_a_whole_null_and_exits(rq_worker_later, api_factory, worker_log):
    admin = api_factory("admin")
    null = admin.post("/audits", json={**NULL, "facts_per_property": 20})
    assert null.status_code == 202, null.text
    worker = rq_worker_later("--burst")
    assert worker.wait(timeout=600) == 0
    body = admin.get(f"/audits/{null.json()['id']}").json()
    assert body["status"] == "succeeded" and body["summary"]["null_facts"] == 20, body
    assert "Traceback" not in worker_log.read_text()


def test_a_burst_worker_stops_on_sigterm_after_its_chunk_and_the_null_goes_on_later(
    rq_worker_later, api_factory, worker_log
):
    """SIGTERM to `memaudit worker --burst` mid-chunk: the chunk ends and is stored (RQ's warm shutdown), its
    follow-up job waits in the queue, and the worker exits 0 without taking it; a later worker finishes the null."""
    import signal

    admin = api_factory("admin")
    null = admin.post("/audits", json=NULL)
    assert null.status_code == 202, null.text
    null_id = null.json()["id"]
    worker = rq_worker_later("--burst")
    chunk_seconds(null_id)  # a few chunks stored: the model is loaded and the null runs
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=300) == 0
    assert "Traceback" not in worker_log.read_text()
    body = admin.get(f"/audits/{null_id}").json()
    assert body["status"] == "queued" and 0 < stored_people(null_id) < PEOPLE, body
    rq_worker_later("--burst").wait(timeout=900)
    body = admin.get(f"/audits/{null_id}").json()
    assert body["status"] == "succeeded" and stored_people(null_id) == PEOPLE, body
