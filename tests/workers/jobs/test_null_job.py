"""The null job (workers/jobs/null.py) with real Postgres and the ground-truth model: a null whose rows are deleted
while a job scores fails with that reason and stores nothing — not an internal error."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from sqlalchemy import delete, func, select

from app.db.engine import session_scope
from app.db.models import NullDistribution, NullFact
from tests.conftest import _reset_caches, migrated_database
from tests.support.faults import audit_row
from workers.jobs import null

NULL = {
    "kind": "null",
    "model": "groundtruth-tiny",
    "properties": ["P27"],
    "method": "full",
    "facts_per_property": 40,
    "options": {"paraphrases": 2, "counterfactuals": 40, "near_duplicates": False},
}


@pytest.fixture
def admin(pg_env, api_factory, monkeypatch):
    from app.settings import get_settings

    # one job scores the whole null (40 people x 492 sentences), so the deletion lands while it scores
    monkeypatch.setenv("MEMAUDIT_NULL_JOB_SENTENCES", "50000")
    get_settings.cache_clear()
    return api_factory("admin")


def test_a_null_whose_rows_are_deleted_while_it_scores_fails_with_that_reason(admin, caplog):
    with session_scope() as s:  # what the database held before (a migrated one holds the shipped nulls)
        stored_before = s.scalar(select(func.count()).select_from(NullFact))
    r = admin.post("/audits", json=NULL)
    assert r.status_code == 202, r.text
    audit_id = r.json()["id"]
    thread = threading.Thread(target=null.run, args=(audit_id,), daemon=True)
    with caplog.at_level(logging.INFO):
        thread.start()
        deadline = time.monotonic() + 120
        while not (audit_row(audit_id).progress_done or 0) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert audit_row(audit_id).progress_done, "the null job reported no progress in 120 s"
        with session_scope() as s:  # while it scores: its distributions are deleted (their facts with them)
            s.execute(delete(NullDistribution).where(NullDistribution.audit_id == audit_id))
        thread.join(timeout=300)
    assert not thread.is_alive()
    final = audit_row(audit_id)
    assert (final.status, final.error) == ("failed", null.ERASED), final.error
    assert "unexpected error" not in caplog.text
    with session_scope() as s:
        assert s.scalar(select(func.count()).select_from(NullFact)) == stored_before, "the job stored null facts"


@pytest.fixture
def own_database(pg_env, postgres, monkeypatch):
    """A database of its own: the test finishes a dump import, which would change the pool of other tests."""
    url = migrated_database(postgres, "poolchange")
    pg_env["MEMAUDIT_DATABASE_URL"] = url
    monkeypatch.setenv("MEMAUDIT_DATABASE_URL", url)
    _reset_caches()
    return url


def test_a_null_whose_pool_changed_after_submission_fails_saying_so(own_database, admin):
    """A null records a hash of its counterfactual pool when it is submitted (its key holds it); a dump import that
    builds another pool before a chunk runs would mix two pools under one key: the chunk fails, storing nothing."""
    from app.db.models.wikidata import PoolValue, WikidataImport
    from app.db.vocabulary import ImportStatus

    body = NULL | {"facts_per_property": 2, "options": NULL["options"] | {"pool": "imported"}}
    r = admin.post("/audits", json=body)  # no import yet: the catalog's pool, hashed into its configuration
    assert r.status_code == 202, r.text
    audit_id = r.json()["id"]
    with session_scope() as s:  # an import finishes with a pool of its own before the job runs
        dump = WikidataImport(path="dump.json", fingerprint="f" * 16, status=ImportStatus.SUCCEEDED)
        s.add(dump)
        s.flush()
        s.add_all(
            PoolValue(import_id=dump.id, property_id="P27", position=i, value=v, humans=10 - i)
            for i, v in enumerate(["Norway", "Peru", "Japan"])
        )
    null.run(audit_id)
    final = audit_row(audit_id)
    assert (final.status, final.error) == ("failed", null.POOL_CHANGED.format(pid="P27")), final.error
    with session_scope() as s:
        stored = select(func.count(NullFact.id)).join(NullDistribution).where(NullDistribution.audit_id == audit_id)
        assert s.scalar(stored) == 0
