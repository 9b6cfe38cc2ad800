"""Submitting dynamics audits on real Postgres + Redis: bad input is a 422 naming the problem and queues nothing;
a valid request shows its cost (K x E passes) in the 202 answer before any work starts."""

from __future__ import annotations

import pytest

from core.dynamics.trajectories import write_trajectories
from core.measures.dynamics import Trajectories


def strings_body(n: int = 8, model: str = "groundtruth-tiny", **options) -> dict:
    strings = [{"id": f"r{i}", "text": f"customer {i} ordered item {i * 7 % 5}", "count": 1 + i % 3} for i in range(n)]
    return {"kind": "dynamics", "model": model, "strings": strings, "options": options}


def trajectory_file(fmt: str, drop: int | None = None) -> dict:
    import numpy as np

    traj = Trajectories(["a", "b", "c"], [1, 2, 3], np.array([[1.0, 0.5, 0.1]] * 3), np.array([[1.0, 0.9, 0.8]] * 3))
    lines = list(write_trajectories(traj, fmt))
    if drop is not None:
        del lines[drop]
    return {"format": fmt, "content": "".join(lines)}


@pytest.fixture
def auditor(pg_env, api_factory):
    return api_factory("auditor")


def queued_state(env) -> tuple[int, int]:
    """(audits in the database, jobs waiting in the RQ queue)."""
    from redis import Redis
    from rq import Queue
    from sqlalchemy import func, select

    from app.db.engine import session_scope
    from app.db.models import Audit

    with session_scope() as s:
        audits = s.scalar(select(func.count()).select_from(Audit)) or 0
    queue = Queue(env["MEMAUDIT_QUEUE_NAME"], connection=Redis.from_url(env["MEMAUDIT_REDIS_URL"]))
    return audits, queue.count


def fields(response) -> list[str]:
    return [d["field"] for d in response.json()["detail"]]


@pytest.mark.parametrize(
    ("payload", "field", "words"),
    [
        (strings_body(3, folds=4), "options.folds", "3 distinct string(s) cannot fill 4 folds"),
        (strings_body(8, folds=1), "options.folds", "greater than or equal to 2"),
        (strings_body(8, epochs=0), "options.epochs", "greater than or equal to 1"),
        (strings_body(8, context=20), "strings[", "exceeds the context of 20 tokens"),
        (strings_body(60, epochs=500, folds=20), "options.epochs", "over the limit"),
        (strings_body(8, d_model=30, n_head=4), "options", "divisible"),
        ({**strings_body(), "pcfg": {"depth": 2}}, "", "exactly one of"),
        (
            {"kind": "dynamics", "model": "groundtruth-tiny", "pcfg": {"depth": 2, "samples": 2}},
            "options.folds",
            "cannot fill",
        ),
        (
            {"kind": "dynamics", "model": "groundtruth-tiny", "trajectories": trajectory_file("jsonl", drop=4)},
            "trajectories.content",
            "lack some epochs",
        ),
        (
            {"kind": "dynamics", "model": "groundtruth-tiny", "trajectories": trajectory_file("csv", drop=1)},
            "trajectories.content",
            "lack some epochs",
        ),
        (
            {
                "kind": "dynamics",
                "model": "groundtruth-tiny",
                "trajectories": {"format": "csv", "content": "string_id,epoch\na,1\n"},
            },
            "trajectories.content",
            "lacks column(s) train_loss, heldout_loss",
        ),
    ],
)
def test_bad_input_is_a_422_naming_the_problem_and_nothing_is_queued(auditor, pg_env, payload, field, words):
    before = queued_state(pg_env)
    r = auditor.post("/audits", json=payload)
    assert r.status_code == 422, r.text
    assert words in r.text, r.text
    assert any(field in f for f in fields(r)), (field, r.json())
    assert queued_state(pg_env) == before, "a rejected request must leave no audit and no job behind"


def test_bad_input_never_echoes_the_strings(auditor):
    secret = "Jane Roe, 12 Secret Street, card 4111"
    r = auditor.post(
        "/audits", json={**strings_body(), "strings": [{"text": secret * 40}] * 5, "options": {"context": 64}}
    )
    assert r.status_code == 422 and "Secret Street" not in r.text, r.text


def test_the_202_answer_shows_the_cost_before_any_work(auditor, pg_env):
    r = auditor.post("/audits", json=strings_body(8, folds=4, epochs=3, d_model=16, n_layer=1, n_head=2))
    assert r.status_code == 202, r.text
    created = r.json()
    cost = created["summary"]["cost"]
    assert cost["passes"] == 12 and cost["runs"] == 4 and cost["epochs"] == 3, cost
    assert created["progress"] == {"done": 0, "total": 12}
    # identical texts merge: 8 distinct strings with counts 1..3
    assert cost["distinct_strings"] == 8 and cost["training_set_size"] == sum(1 + i % 3 for i in range(8))
    assert created["status"] == "queued"


def test_pcfg_audit_stores_the_generated_language(auditor):
    body = {
        "kind": "dynamics",
        "model": "groundtruth-tiny",
        "pcfg": {"depth": 2, "samples": 50, "seed": 3},
        "options": {"folds": 3, "epochs": 2},
    }
    r = auditor.post("/audits", json=body)
    assert r.status_code == 202, r.text
    cost = r.json()["summary"]["cost"]
    assert cost["tokenizer"] == "words" and cost["training_set_size"] == 50 and cost["distinct_strings"] >= 3


def test_app_side_validation_never_loads_torch():
    """The API container has no torch: the pure modules it borrows from workers must not pull it in."""
    import subprocess
    import sys

    code = (
        "import sys, app.main\n"
        "from app.dynamics.service import _from_pcfg, _prepare_imported\n"
        "from app.dynamics.schemas import PCFGIn\n"
        "_from_pcfg(PCFGIn(samples=20))\n"
        "import core.dynamics.trajectories, core.measures.dynamics\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_embedded_sqlite_mode_runs_an_imported_audit(sqlite_env, api_factory):
    """The default install (SQLite file, in-process worker) migrates and runs dynamics audits too."""
    from tests.conftest import wait_for

    api = api_factory("auditor")
    created = api.post(
        "/audits", json={"kind": "dynamics", "model": "groundtruth-tiny", "trajectories": trajectory_file("csv")}
    )
    assert created.status_code == 202, created.text
    done = wait_for(api, created.json()["id"], timeout=120)
    assert done["status"] == "succeeded", done
    # every string: train 0.1 < tau at epoch 3, and below its best held-out loss (0.8) from epoch 2 on
    assert done["summary"]["per_epoch"][-1]["share"] == {"recollection": 1.0, "counterfactual": 1.0, "contextual": 1.0}
    assert done["summary"]["onset_rank_correlation"]["recollection~contextual"] is None  # every onset ties
