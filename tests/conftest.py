"""Session fixtures: real PostgreSQL and Redis on loopback, migrated databases, API clients, keys.

`pg_env` switches the process to Postgres + Redis (RQ); `sqlite_env` to the embedded default (SQLite file,
in-process worker thread). Both clear the cached settings so every component sees the switch."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest

from tests.support import gc_pace, zygote
from tests.support.llama_server import llama_server, smollm2_tokenizer_dir  # noqa: F401 (served-model fixtures)
from tests.support.servers import Postgres, Redis, start_postgres, start_redis

REPO = Path(__file__).resolve().parent.parent

# One torch (and BLAS) thread per test process and per process it starts, as a worker has (MEMAUDIT_TORCH_THREADS,
# default 1, is applied where a model is loaded): torch work that loads no model (the capacity job's training, run in
# the test process or a child) otherwise ran two threads beside two other xdist processes on two cores, spinning.
# test_capacity_job.py alone: 44.4 -> 30.5-35.5 CPU-s (two runs). A test that asks for more threads still gets them.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The garbage collector at a slower pace in the test processes (tests/support/gc_pace.py: why, and what was measured).
gc_pace.pace()

# Property tests check results, never time: hypothesis' 200 ms deadline per example and its "data generation is too
# slow" health check are timed assertions; on a loaded 2-core machine (three xdist processes beside torch) a scipy
# comparison that passes alone failed among them.
hypothesis.settings.register_profile("memaudit", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow])
hypothesis.settings.load_profile("memaudit")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest test files first (tests/support/schedule.py): `make test`'s xdist processes take files in this
    order (--no-loadscope-reorder), so they finish close together; when llama-cpp-python is compiled in the background
    (the vendored wheel did not load here), the served-model files last (their fixture waits for the build)."""
    from tests.support import llama_build
    from tests.support.schedule import load_durations, longest_first

    items[:] = longest_first(items, load_durations())
    if llama_build.started():  # llama-cpp-python built in the background: the tests that serve a model go last
        # (started, not running: every xdist process must collect the same order, and a build may end meanwhile)
        items.sort(key=lambda item: "llama_server" in getattr(item, "fixturenames", ()))


def _reset_caches() -> None:
    from app.limits import _limiter_for
    from app.queue import _dispatcher_for
    from app.settings import get_settings

    get_settings.cache_clear()
    _APP.clear()
    _dispatcher_for.cache_clear()
    # the in-process rate limiter belongs to one embedded service: each test's database numbers its keys from 1,
    # and key:1's requests of one test must not count against key:1 of the next
    _limiter_for.cache_clear()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    pg = start_postgres()
    yield pg
    pg.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Redis]:
    server = start_redis()
    yield server
    server.stop()


def migrated_database(postgres: Postgres, prefix: str) -> str:
    """A new, migrated database on the test server. A live stack (API + worker processes) that must not see what
    earlier tests left behind takes its own: a worker's reconciler enqueues every queued audit in its database and
    recovers every expired lease there, whichever test's queue they came from (one database is one deployment)."""
    return postgres.create_database(f"{prefix}_{uuid.uuid4().hex[:8]}", template=_migrated_template(postgres))


TEMPLATE_DATABASE = "memaudit_template"


def _migrated_template(postgres: Postgres) -> str:
    """One database per test server migrated to the latest schema, copied by every ``migrated_database`` (CREATE
    DATABASE … TEMPLATE: a file copy instead of every migration again). It is migrated under another name and renamed
    when complete; nothing connects to it afterwards (Alembic's connection is not pooled), as a template requires."""
    if not postgres.has_database(TEMPLATE_DATABASE):
        from app.migrate import migrate

        migrate(postgres.create_database(f"{TEMPLATE_DATABASE}_partial"))
        postgres.rename_database(f"{TEMPLATE_DATABASE}_partial", TEMPLATE_DATABASE)
    return TEMPLATE_DATABASE


@pytest.fixture(scope="session")
def pg_url(postgres: Postgres) -> str:
    return migrated_database(postgres, "memaudit")


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    from app.migrate import migrate

    url = f"sqlite:///{tmp_path_factory.mktemp('embedded') / 'memaudit.sqlite3'}"
    migrate(url)
    return url


@pytest.fixture
def pg_env(pg_url: str, redis_server: Redis, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    env = {
        "MEMAUDIT_DATABASE_URL": pg_url,
        "MEMAUDIT_REDIS_URL": redis_server.url,
        "MEMAUDIT_QUEUE_NAME": f"test-{uuid.uuid4().hex[:6]}",
        "MEMAUDIT_ENV": "test",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    _reset_caches()
    yield env
    _reset_caches()


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a `memaudit` subprocess as a user runs it: its own SQLite file, no MEMAUDIT_* of ours."""
    from tests.support.cli import cli_env_at

    return cli_env_at(tmp_path)


@pytest.fixture
def sqlite_env(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    # a copy of the migrated file per test, as each user's embedded service has its own: what a test leaves queued
    # (the nulls its submissions created) is not the next test's work
    url = f"sqlite:///{tmp_path / 'embedded.sqlite3'}"
    shutil.copyfile(sqlite_url.removeprefix("sqlite:///"), tmp_path / "embedded.sqlite3")
    monkeypatch.setenv("MEMAUDIT_DATABASE_URL", url)
    monkeypatch.delenv("MEMAUDIT_REDIS_URL", raising=False)
    monkeypatch.setenv("MEMAUDIT_ENV", "test")
    _reset_caches()
    yield {"MEMAUDIT_DATABASE_URL": url}
    end_embedded_service()


def end_embedded_service() -> None:
    """The end of a test's embedded service: its runner stops as the end of its process would (``shutdown``: its
    audits go back to the queue and its running job stops at its next progress report), while the test's settings
    still name its database; then the caches are reset. Otherwise what the test left queued or running — the
    default-sized null its first read of results queued — went on in this pytest process's daemon thread beside the
    next tests (test_groundtruth_rates.py's, of 11 templates and 100 counterfactuals, was still scoring when the
    process exited: an abort in torch)."""
    from app.queue import EmbeddedDispatcher, _dispatcher_for
    from app.settings import get_settings

    if _dispatcher_for.cache_info().currsize:
        runner = _dispatcher_for(get_settings().redis_url)
        if isinstance(runner, EmbeddedDispatcher):
            runner.shutdown()
    _reset_caches()


def make_key(role: str) -> str:
    """A fresh API key of `role` in the currently selected database."""
    from app.auth.keys import create_key
    from app.db.engine import session_scope
    from app.settings import get_settings

    with session_scope() as s:
        _, token = create_key(s, get_settings(), role, f"test-{role}")
    return token


_APP: list[Any] = []  # [what it was built under, the app] while the in-process clients share one: see shared_app


def shared_app() -> Any:
    """The app the in-process clients share while the settings and the registries a test may add to (kinds,
    policies) stay the same; a new one after any change (and after ``_reset_caches``). FastAPI builds a route's
    validators at the first request that reaches its router in each app (20-50 ms a router), and an ``Api`` per key
    built its own app: ~60 CPU-s of a suite run (docs/lab/2026-11-29-per-process-costs.md)."""
    from app.kinds import KINDS
    from app.main import create_app
    from app.policies import POLICIES
    from app.settings import get_settings

    settings, registries = get_settings(), (tuple(KINDS), tuple(POLICIES))
    if not _APP or _APP[0][0] is not settings or _APP[0][1] != registries:  # the settings object itself
        _APP[:] = [(settings, registries), create_app()]
    return _APP[1]


class Api:
    """A TestClient bound to one API key, on the app of the current settings (``shared_app``)."""

    def __init__(self, key: str | None) -> None:
        from fastapi.testclient import TestClient

        self.client = TestClient(shared_app())
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def __getattr__(self, method: str):  # get, post, delete …
        call = getattr(self.client, method)

        def send(url: str, **kw):
            headers = {**self.headers, **kw.pop("headers", {})}
            return call(url, headers=headers, **kw)

        return send


@pytest.fixture
def api_factory():
    return lambda role=None, key=None: Api(key if key is not None else (make_key(role) if role else None))


def wait_for(api: Api, audit_id: str, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = api.get(f"/audits/{audit_id}").json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            return body
        time.sleep(0.5)
    raise AssertionError(f"audit {audit_id} did not finish in {timeout} s (last: {body})")


@pytest.fixture(scope="session")
def worker_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("worker") / "worker.log"


@pytest.fixture
def rq_worker_later(
    pg_env: dict[str, str], postgres: Postgres, worker_log: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator:
    """``start()`` starts a real `memaudit worker` process on the test Redis and Postgres (its output goes to
    `worker_log`), when the test is ready for it: after submitting, for a test of the order work is taken in.

    The test (and its worker) switch to a database of their own: the worker's reconciler enqueues every queued
    audit in its database, and the audits earlier tests left queued in the shared one (batches no worker ran, on
    batch lanes that may be this test's) would run first and upset what the test measures (fair turns, order)."""
    url = migrated_database(postgres, "worker")
    pg_env["MEMAUDIT_DATABASE_URL"] = url
    monkeypatch.setenv("MEMAUDIT_DATABASE_URL", url)
    _reset_caches()
    started: list[zygote.Process] = []

    def start(*args: str) -> zygote.Process:
        """``args``: more `memaudit worker` arguments (``"--burst"``)."""
        started.append(start_worker(pg_env, worker_log, *args))
        return started[-1]

    yield start
    for proc in started:
        stop_worker(proc)


def start_worker(env: dict[str, str], log_file: Path, *args: str) -> zygote.Process:
    """A real `memaudit worker` process with ``env`` over ours, its output appended to ``log_file`` (forked from
    this pytest process's zygote, which has imported torch and the app once: tests/support/zygote.py)."""
    return zygote.start(["worker", *args], {**os.environ, **env}, log_file, REPO)


def stop_worker(proc: zygote.Process) -> None:
    """SIGTERM, then SIGKILL after 2 s: RQ's warm shutdown finishes the job it runs first (often a null's chunk that
    no test waits for; teardowns took 10-20 s, and up to 5 CPU-s of scoring with a 5 s grace), and a teardown needs
    the process gone, not its job done; an idle worker leaves in 0.2-1.8 s (os._exit after its loop, at load 12-14).
    The tests of a worker's own shutdown stop it themselves (tests/workers/test_worker_signals.py)."""
    proc.terminate()
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def rq_worker(rq_worker_later) -> zygote.Process:  # noqa: ANN001
    """A real `memaudit worker` process, started before the test (see ``rq_worker_later``)."""
    return rq_worker_later()


@pytest.fixture(scope="module")
def module_worker(postgres: Postgres, redis_server: Redis, worker_log: Path) -> Iterator[dict[str, str]]:
    """One database, queue and real `memaudit worker` process shared by the tests of a module (one torch import and
    model load instead of one per test), for tests that need no deployment of their own: they submit their own
    audits and read only those. Use it through ``shared_worker``."""
    env = {
        "MEMAUDIT_DATABASE_URL": migrated_database(postgres, "module"),
        "MEMAUDIT_REDIS_URL": redis_server.url,
        "MEMAUDIT_QUEUE_NAME": f"test-{uuid.uuid4().hex[:6]}",
        "MEMAUDIT_ENV": "test",
    }
    proc = start_worker(env, worker_log)
    yield env
    stop_worker(proc)


@pytest.fixture
def shared_worker(module_worker: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The test runs against its module's shared worker, database and queue (``module_worker``)."""
    for k, v in module_worker.items():
        monkeypatch.setenv(k, v)
    _reset_caches()
    yield module_worker
    _reset_caches()


@pytest.fixture
def live_api(pg_env: dict[str, str], tmp_path: Path):
    """Start live APIs (uvicorn subprocesses on loopback) on the test Postgres and Redis: `live_api(**settings)`
    with MEMAUDIT_* overrides, e.g. `live_api(MEMAUDIT_RATE_LIMIT_PER_MINUTE="0")`. Stopped after the test."""
    from tests.support.live import start_api

    started = []

    def start(**overrides: str):
        api = start_api({**pg_env, **overrides}, tmp_path / f"api-{len(started)}.log")
        started.append(api)
        return api

    yield start
    for api in started:
        api.stop()
