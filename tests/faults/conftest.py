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

from tests.conftest import _reset_caches
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
    from app.migrate import migrate

    pg, redis = fault_servers
    url = pg.create_database(f"faults_{uuid.uuid4().hex[:8]}")
    migrate(url)
    env = {
        "MEMAUDIT_DATABASE_URL": url,
        "MEMAUDIT_REDIS_URL": redis.url,
        "MEMAUDIT_ENV": "test",
        "MEMAUDIT_QUEUE_NAME": f"faults-{uuid.uuid4().hex[:6]}",
        "MEMAUDIT_TORCH_THREADS": "1",
        # The faults submit bursts of hundreds of audits on one key: the per-key limits are not under test here.
        "MEMAUDIT_SUBMIT_RATE_PER_MINUTE": "0",
        "MEMAUDIT_MAX_ACTIVE_AUDITS_PER_KEY": "0",
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
