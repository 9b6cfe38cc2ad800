"""Helpers of the fault-injection suite (tests/faults): processes started with the suite's environment, and
reads of what the database holds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support import loopback, zygote
from tests.support.servers import Postgres, Redis

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "workers" / "groundtruth" / "manifest.json"
TIMINGS = {
    "MEMAUDIT_LEASE_TTL_SECONDS": "3",
    "MEMAUDIT_HEARTBEAT_SECONDS": "0.5",
    "MEMAUDIT_CANCEL_GRACE_SECONDS": "2",
    "MEMAUDIT_RECONCILE_INTERVAL_SECONDS": "1",
    "MEMAUDIT_RECONCILE_GRACE_SECONDS": "1",
}
LEASE_TTL, RECONCILE_INTERVAL = 3.0, 1.0


@dataclass
class FaultEnv:
    env: dict[str, str]
    pg: Postgres
    redis: Redis
    logs: Path
    procs: list[zygote.Process] = field(default_factory=list)

    def _spawn(self, args: list[str], name: str) -> zygote.Process:
        """`memaudit <args>` (a worker or `serve`), forked from the zygote (tests/support/zygote.py)."""
        proc = zygote.start(args, {**os.environ, **self.env}, self.logs / f"{name}.log", REPO)
        self.procs.append(proc)
        return proc

    def worker(self, name: str = "worker", *, preload: bool = False) -> zygote.Process:
        return self._spawn(["worker", *(["--preload", "groundtruth-tiny"] if preload else [])], name)

    def api(self, port: int) -> zygote.Process:
        proc = self._spawn(["serve", "--port", str(port), "--log-level", "warning"], f"api-{port}")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if loopback.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    return proc
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, f"the API exited: {self.log(f'api-{port}')[-2000:]}"
            time.sleep(0.2)
        raise AssertionError("the API did not answer /health within 120 s")

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text() if path.exists() else ""

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=2)  # an idle worker or an API leaves in well under 2 s
            except subprocess.TimeoutExpired:  # a worker finishing a job: its database is dropped anyway
                proc.kill()
                proc.wait()


def person(i: int = 0) -> dict:
    return json.loads(MANIFEST.read_text())["trained"][i]


def subject_body(
    i: int = 0,
    *,
    counterfactuals: int = 10,
    paraphrases: int = 0,
    similar_names: int = 1,
    model: str = "groundtruth-tiny",
) -> dict:
    """A subject audit (on the ground-truth model by default); its size (and so its run time) is set by the
    options and the model."""
    p = person(i)
    facts = [{"property": pid, "value": v} for pid, values in p["facts"].items() for v in values]
    options = {
        "counterfactuals": counterfactuals,
        "paraphrases": paraphrases,
        "similar_names": similar_names,
        "near_duplicates": False,
    }
    return {"kind": "subject", "model": model, "subject": {"name": p["name"], "facts": facts}, "options": options}


def audit_row(audit_id: str):  # noqa: ANN201
    from app.db.engine import session_scope
    from app.db.models import Audit

    with session_scope() as s:
        audit = s.get(Audit, audit_id)
        if audit is not None:
            s.expunge(audit)
        return audit


def wait_until(check: Callable[[], object], timeout: float, what: str, poll: float = 0.1) -> float:
    """Seconds until ``check()`` is truthy; fails the test after ``timeout`` (database errors count as no)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if check():
                return time.monotonic() - start
        except Exception:  # noqa: BLE001 — the database may be restarting
            pass
        time.sleep(poll)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


def stored_once(audit_id: str, n_templates: int) -> tuple[int, int]:
    """Check that an audit's results were written exactly once: one result per property, ``n_templates``
    canaries per result, and per canary one score per candidate (its true values and counterfactuals), none
    twice. Returns (results, candidate scores); (0, 0) when nothing was stored."""
    from sqlalchemy import select
    from sqlalchemy.orm import selectinload

    from app.db.engine import session_scope
    from app.db.models import Canary, FactResult

    with session_scope() as s:
        results = list(
            s.scalars(
                select(FactResult)
                .where(FactResult.audit_id == audit_id)
                .options(
                    selectinload(FactResult.canaries).selectinload(Canary.candidates),
                    selectinload(FactResult.counterfactuals),
                )
            )
        )
        properties = [r.property_id for r in results]
        assert len(properties) == len(set(properties)), f"a property's result was stored twice: {properties}"
        scores = 0
        for r in results:
            assert len(r.canaries) == n_templates, f"{len(r.canaries)} canaries, {n_templates} expected"
            counterfactuals = {cf.value for cf in r.counterfactuals}
            for c in r.canaries:
                values = [cand.value for cand in c.candidates]
                assert len(values) == len(set(values)), "a candidate was scored twice in one canary"
                assert counterfactuals <= set(values) and len(values) <= len(counterfactuals) + len(r.fact_ids)
                scores += len(values)
    return len(results), scores
