"""A verification submitted before its nulls finish waits the queue's way (issue 39): back to `queued`, saying which
nulls it waits for, its next job parked (RQ: a `deferred` job; the embedded runner: set aside) — and it starts
within one chunk's time after the last of them ends, woken by that null's last job. On a real `memaudit worker`
(Redis, Postgres) and on the embedded runner (SQLite, the in-process thread). The verdicts are not what is checked
here (tests/e2e/test_verification.py measures those)."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import func, select

from app.db.engine import session_scope
from app.db.models import Audit, NullDistribution, NullFact
from app.db.vocabulary import FINAL_STATUSES, AuditStatus
from app.settings import GROUNDTRUTH_DIR
from tests.conftest import wait_for

pytestmark = pytest.mark.slow

MANIFEST = GROUNDTRUTH_DIR.parent / "manifest.json"
# two facts per person (citizenship, birthplace) and nulls of 4 people per property, in chunks of 300 sentences
# (about one person and property each): the after model's null runs as several chunks, so the verification's
# people are scored well before it ends
PROPERTIES = ("P27", "P19")
ENV = {
    "MEMAUDIT_NULL_MIN_PEOPLE": "4",
    "MEMAUDIT_NULL_MAX_PEOPLE": "4",
    "MEMAUDIT_NULL_FACTS_PER_PROPERTY": "4",
    "MEMAUDIT_NULL_JOB_SENTENCES": "300",
}


def _subject_audits(api) -> list[dict]:  # noqa: ANN001
    audits = []
    for person in json.loads(MANIFEST.read_text())["trained"][:2]:
        facts = [{"property": pid, "value": v} for pid in PROPERTIES for v in person["facts"][pid]]
        body = {"kind": "subject", "model": "groundtruth-tiny", "subject": {"name": person["name"], "facts": facts}}
        audits.append(api.post("/audits", json=body).json())
    for audit in audits:
        assert wait_for(api, audit["id"], timeout=600)["status"] == AuditStatus.SUCCEEDED
    return audits


def _row(audit_id: str) -> tuple[str, dict]:
    with session_scope() as s:
        status, summary = s.execute(select(Audit.status, Audit.summary).where(Audit.id == audit_id)).one()
    return status, summary or {}


def _null_state(null_ids: list[str]) -> tuple[int, bool]:
    """(null facts stored so far, every one of these nulls ended)."""
    with session_scope() as s:
        stored = s.scalar(
            select(func.count(NullFact.id))
            .join(NullDistribution, NullDistribution.id == NullFact.distribution_id)
            .where(NullDistribution.audit_id.in_(null_ids))
        )
        statuses = list(s.scalars(select(Audit.status).where(Audit.id.in_(null_ids))))
    return stored or 0, all(st in FINAL_STATUSES for st in statuses)


def verification_starts_within_a_chunk_of_its_nulls(api_factory, start_worker=None) -> None:  # noqa: ANN001
    api = api_factory("auditor")
    if start_worker is not None:
        start_worker()
    forgotten, untouched = (a["subject_id"] for a in _subject_audits(api))
    body = {
        "kind": "verification",
        "model": f"hf:{GROUNDTRUTH_DIR}",  # the same weights under another name: its null is computed now
        "before": "groundtruth-tiny",
        "people": {"subject_ids": [forgotten]},
        "locality": {"subject_ids": [untouched]},
    }
    created = api.post("/audits", json=body)
    assert created.status_code == 202, created.text
    audit_id = created.json()["id"]
    deadline = time.monotonic() + 900
    awaited: list[str] = []
    marks: list[float] = []  # when the awaited nulls stored a chunk
    ended = started = None
    last_stored, last_print = -1, 0.0
    while started is None:
        assert time.monotonic() < deadline, "the verification did not start again within 900 s"
        status, summary = _row(audit_id)
        now = time.monotonic()
        if not awaited and status == AuditStatus.QUEUED and summary.get("waiting_for"):
            awaited = summary["waiting_for"]
            assert not _null_state(awaited)[1], "the nulls had ended: nothing was waited for"
        if awaited:
            stored, done = _null_state(awaited)
            if stored != last_stored:
                marks.append(now)
                last_stored = stored
            if done and ended is None:
                ended = now
            elif ended is not None and status != AuditStatus.QUEUED:
                started = now
        assert status not in FINAL_STATUSES or awaited, f"it ended without waiting for a null: {status} {summary}"
        if now - last_print > 15:  # what a slow run was doing, in the test's output
            print(f"verification {status}, waiting for {awaited}, {len(marks)} chunks seen, nulls ended: {ended}")
            last_print = now
        time.sleep(0.02)
    chunk = max(b - a for a, b in zip(marks, marks[1:], strict=False)) if len(marks) > 1 else 0.0
    waited = started - ended
    message = f"the verification started {waited:.2f} s after its nulls ended; their longest chunk took {chunk:.2f} s"
    print(message, f"({len(marks)} chunks seen)")
    assert len(marks) >= 3, f"the verification waited through too few chunks to tell: {len(marks)}"
    assert waited <= chunk + 1.0, message
    assert wait_for(api, audit_id, timeout=300)["status"] == AuditStatus.SUCCEEDED


def test_a_verification_waits_for_its_nulls_on_a_worker(rq_worker_later, api_factory, monkeypatch) -> None:  # noqa: ANN001
    from app.settings import get_settings

    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    verification_starts_within_a_chunk_of_its_nulls(api_factory, rq_worker_later)


def test_a_verification_waits_for_its_nulls_on_the_embedded_runner(sqlite_env, api_factory, monkeypatch) -> None:  # noqa: ANN001
    from app.settings import get_settings

    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    verification_starts_within_a_chunk_of_its_nulls(api_factory)
