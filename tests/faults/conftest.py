"""Fault injection with real processes: a Postgres and a Redis of this package's own (so that killing and
restarting them disturbs no other test), real `memaudit worker` processes and, where a test needs one, a real
uvicorn API process. Timings are shortened through settings (lease TTL 3 s, heartbeat 0.5 s, reconciler every
1 s), so recoveries that take ~40 s with the defaults take seconds here."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import _reset_caches, migrated_database
from tests.support.faults import TIMINGS, FaultEnv
from tests.support.servers import Postgres, Redis, start_postgres, start_redis


@pytest.fixture(scope="package")
def fault_servers() -> Iterator[tuple[Postgres, Redis]]:
    pg, redis = start_postgres(), start_redis()
    yield pg, redis
    redis.stop()
    pg.stop()


@pytest.fixture
def fault_env(fault_servers, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FaultEnv]:
    pg, redis = fault_servers
    url = migrated_database(pg, "faults")  # a copy of the package server's migrated template (migrated once)
    env = {
        "MEMAUDIT_DATABASE_URL": url,
        "MEMAUDIT_REDIS_URL": redis.url,
        "MEMAUDIT_ENV": "test",
        "MEMAUDIT_QUEUE_NAME": f"faults-{uuid.uuid4().hex[:6]}",
        "MEMAUDIT_TORCH_THREADS": "1",
        # The faults submit bursts of hundreds of audits on one key: the per-key limits are not under test here.
        "MEMAUDIT_SUBMIT_RATE_PER_MINUTE": "0",
        "MEMAUDIT_MAX_ACTIVE_AUDITS_PER_KEY": "0",
        # Each submission creates its configuration's null (background work on a batch lane, which no fault
        # concerns; one test waits until nothing is queued or running, nulls included): its least size, 20 people.
        "MEMAUDIT_NULL_FACTS_PER_PROPERTY": "20",
        **TIMINGS,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    _reset_caches()
    fenv = FaultEnv(env, pg, redis, tmp_path)
    yield fenv
    fenv.close()
    _reset_caches()
    if redis.proc.poll() is not None:  # a failed test may leave a server down: the next test needs it
        redis.start()
    if not _listening(pg.port):
        pg.start()


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
