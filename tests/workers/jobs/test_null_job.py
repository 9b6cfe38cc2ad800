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
        assert s.scalar(select(func.count()).select_from(NullFact)) == 0
