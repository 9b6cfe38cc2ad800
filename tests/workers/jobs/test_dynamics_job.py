"""The dynamics job run in-process against real Postgres: safe to run twice, honours cancellation, and the
finetune recipe trains a registered-style model (the small synthetic items model) K x E passes."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import update

from app.db.engine import session_scope
from app.db.models import Audit
from scripts.train_items_model import MODEL_DIR
from workers.jobs.dynamics import run
from workers.lm.registry import HF_UNAVAILABLE


def strings(n: int = 12) -> list[dict]:
    return [{"id": f"k{i}", "text": f"{i}::title number {i}::genre {i % 3}", "count": 1} for i in range(n)]


def submit(api, model: str = "groundtruth-tiny", **options) -> str:
    body = {"kind": "dynamics", "model": model, "strings": strings(), "options": options}
    r = api.post("/audits", json=body)
    assert r.status_code == 202, r.text
    return r.json()["id"]


def state(audit_id: str) -> Audit:
    with session_scope() as s:
        audit = s.get(Audit, audit_id)
        s.expunge(audit)
    return audit


def rows(api, audit_id: str) -> list[dict]:
    import json

    return [json.loads(line) for line in api.get(f"/audits/{audit_id}/strings").text.splitlines()]


@pytest.fixture
def auditor(pg_env, api_factory):
    return api_factory("auditor")  # jobs go to Redis, where no worker listens: this test runs them itself


TINY = {"folds": 3, "epochs": 3, "d_model": 16, "n_layer": 1, "n_head": 2, "batch_size": 4}


def test_running_the_job_twice_gives_the_same_results(auditor):
    audit_id = submit(auditor, **TINY)
    run(audit_id)
    first = state(audit_id)
    assert first.status == "succeeded", first.error
    before = rows(auditor, audit_id)
    # a retry after a crash finds the audit running again: it must redo the work and land on the same numbers
    with session_scope() as s:
        s.execute(update(Audit).where(Audit.id == audit_id).values(status="queued"))
    run(audit_id)
    again = state(audit_id)
    assert again.status == "succeeded" and again.attempts == 2
    assert rows(auditor, audit_id) == before
    assert again.summary["per_epoch"] == first.summary["per_epoch"]
    run(audit_id)  # a finished audit is left alone
    assert state(audit_id).attempts == 2


def test_cancellation_stops_the_run(auditor):
    # 3 folds of 500 epochs of a 2-layer model: minutes of training, cancelled at its first progress report (200
    # epochs of the 1-layer TINY model all ran in under a second on a fast CPU, before the poll below saw any)
    audit_id = submit(auditor, **{**TINY, "epochs": 500, "d_model": 64, "n_layer": 2})
    worker = threading.Thread(target=run, args=(audit_id,))
    worker.start()
    deadline = time.monotonic() + 60
    while state(audit_id).progress_done < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert auditor.delete(f"/audits/{audit_id}").status_code == 200
    worker.join(timeout=60)
    assert not worker.is_alive(), "the job kept training after the audit was cancelled"
    final = state(audit_id)
    assert final.status == "cancelled" and final.progress_done < final.progress_total == 1500, (
        final.status,
        final.progress_done,
    )


@pytest.mark.slow
def test_finetune_recipe_trains_the_registered_model_k_times(auditor):
    audit_id = submit(auditor, model=f"hf:{MODEL_DIR}", recipe="finetune", folds=2, epochs=2, lr=1e-3, batch_size=4)
    run(audit_id)
    audit = state(audit_id)
    assert audit.status == "succeeded", audit.error
    assert audit.progress_done == audit.progress_total == 4
    assert audit.summary["recipe"] == "finetune"
    table = rows(auditor, audit_id)
    assert len(table) == 12 and all(len(r["train_loss"]) == 2 for r in table)
    # the items model never saw these lines; fine-tuning on them lowers the loss of the runs that train on them
    gap = sum(r["heldout_loss"][-1] - r["train_loss"][-1] for r in table) / len(table)
    assert gap > 0, f"mean held-out minus train loss {gap:.3f}"


def test_a_model_that_cannot_load_fails_readably(auditor):
    audit_id = submit(auditor, model="hf:/nonexistent/model-dir", recipe="finetune", folds=2, epochs=1)
    run(audit_id)
    audit = state(audit_id)
    assert audit.status == "failed" and audit.error == HF_UNAVAILABLE, audit.error  # no path, no reason
