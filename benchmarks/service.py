"""The service as the through-the-service benchmarks run it: the HTTP API in this process on an embedded SQLite
database with its worker thread (no Redis), an admin key, and the waiting and counting they share
(benchmarks/limit_of_detection.py, calibration_cohorts.py, misattribution_strangers.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.measures.null import Rate


def setup(db: Path, threads: int, null_facts: int | None, label: str = "benchmark") -> Any:
    """Point this process at ``db`` (created and migrated if new) and return a TestClient with an admin key.
    One local admin submits every person at once, so the shared API's quotas do not apply; ``null_facts``: null facts
    per property (None: the service's default)."""
    env = {
        "MEMAUDIT_DATABASE_URL": f"sqlite:///{db}",
        "MEMAUDIT_TORCH_THREADS": str(threads),
        "MEMAUDIT_ENV": "development",
        "MEMAUDIT_SUBMIT_RATE_PER_MINUTE": "0",
        "MEMAUDIT_MAX_ACTIVE_AUDITS_PER_KEY": "0",
    }
    if null_facts is not None:
        env["MEMAUDIT_NULL_FACTS_PER_PROPERTY"] = str(null_facts)
    os.environ.update(env)
    os.environ.pop("MEMAUDIT_REDIS_URL", None)
    from fastapi.testclient import TestClient

    from app.auth.keys import create_key
    from app.db.engine import session_scope
    from app.main import create_app
    from app.migrate import migrate
    from app.settings import get_settings

    db.parent.mkdir(parents=True, exist_ok=True)
    migrate()
    with session_scope() as s:
        _, key = create_key(s, get_settings(), "admin", label)
    client = TestClient(create_app())
    client.headers["Authorization"] = f"Bearer {key}"
    return client


def wait(client: Any, ids: Sequence[str], label: str, poll: float) -> None:
    """Until every audit of ``ids`` has ended, printing progress every ``poll`` seconds; exits if one did not
    succeed."""
    started = time.monotonic()
    while True:
        states = [client.get(f"/audits/{i}").json() for i in ids]
        done = [s for s in states if s["status"] in ("succeeded", "failed", "cancelled")]
        if failed := [s["id"] for s in done if s["status"] != "succeeded"]:
            raise SystemExit(f"{label}: audits {failed} did not succeed")
        work = sum(s["progress"]["done"] for s in states), sum(s["progress"]["total"] for s in states)
        print(
            f"  {label}: {len(done)}/{len(ids)} done, sentences {work[0]}/{work[1]}, "
            f"{time.monotonic() - started:.0f} s",
            flush=True,
        )
        if len(done) == len(ids):
            return
        time.sleep(poll)


def rate(k: int, n: int) -> dict[str, Any]:
    """k of n with its 95 % Clopper-Pearson interval (rate None where n is 0)."""
    r = Rate.of(k, n)
    return {"k": k, "n": n, "rate": round(r.rate, 4) if n else None, "ci95": [round(r.low, 4), round(r.high, 4)]}
