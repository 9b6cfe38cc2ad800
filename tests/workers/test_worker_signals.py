"""`memaudit worker` and the signals that stop it, outside the middle of a job (tests/e2e/test_null_chunks.py
sends one mid-job to a real burst worker). RQ's own handlers hold only inside its loop; a SIGTERM before it
(while RQ starts), after it (RQ's teardown) or while a loop fails on Redis must stop the worker too, without a
traceback and without taking another job. The worker runs in this process, on real Redis and Postgres; the
signal is sent at the chosen moment by wrapping one of RQ's own steps."""

from __future__ import annotations

import os
import signal

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.conftest import _reset_caches, migrated_database
from tests.support.faults import audit_row, subject_body
from workers import worker as worker_module
from workers.worker import FairWorker


@pytest.fixture
def own_deployment(pg_env, postgres, monkeypatch):
    """A database of its own (the reconciler enqueues every queued audit in its database), and the signal handlers
    as they were once the test ends."""
    url = migrated_database(postgres, "signals")
    pg_env["MEMAUDIT_DATABASE_URL"] = url
    monkeypatch.setenv("MEMAUDIT_DATABASE_URL", url)
    _reset_caches()
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield pg_env
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def sigterm_then(step):  # noqa: ANN001, ANN201
    def wrapped(self, *args, **kwargs):  # noqa: ANN001, ANN202
        os.kill(os.getpid(), signal.SIGTERM)
        return step(self, *args, **kwargs)

    return wrapped


def test_a_sigterm_while_rq_starts_stops_the_burst_worker_before_it_takes_a_job(
    own_deployment, api_factory, monkeypatch
):
    from app.settings import get_settings

    api = api_factory("auditor")
    queued = [api.post("/audits", json=subject_body(i, counterfactuals=2)).json()["id"] for i in range(2)]
    monkeypatch.setattr(FairWorker, "bootstrap", sigterm_then(FairWorker.bootstrap))
    assert worker_module._burst(get_settings()) == 0
    assert [audit_row(a).status for a in queued] == ["queued", "queued"], "a worker asked to stop ran audits"


def test_a_sigterm_during_rq_teardown_ends_the_burst_worker_without_a_traceback(own_deployment, monkeypatch):
    from app.settings import get_settings

    # RQ's teardown unregisters the worker: its own handler (still installed) would raise StopRequested there
    monkeypatch.setattr(FairWorker, "register_death", sigterm_then(FairWorker.register_death))
    assert worker_module._burst(get_settings()) == 0


def test_a_sigterm_while_the_loop_fails_on_redis_stops_the_worker(own_deployment, monkeypatch):
    calls = []

    def bootstrap(self, *args, **kwargs):  # noqa: ANN001, ANN202
        calls.append(1)
        assert len(calls) == 1, "the worker started another loop after SIGTERM"
        os.kill(os.getpid(), signal.SIGTERM)
        raise RedisConnectionError("Redis went away")

    monkeypatch.setattr(FairWorker, "bootstrap", bootstrap)
    assert worker_module._work_forever() == 0
