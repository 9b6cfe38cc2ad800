"""Cohort benchmark: a roster of fictitious people through API → Redis → N workers → Postgres, side by side.

    python -m benchmarks.cohort                       # 200 people on groundtruth-tiny with 1, 2, 4 workers,
                                                      # then 8 people on smollm2-135m with 1 worker
    python -m benchmarks.cohort --people 60 --workers 1 --workers 2 --smollm2 0     # quicker

Everything runs on loopback and is bounded: its own PostgreSQL and Redis (temporary, as the tests start them), one
`memaudit serve` API process, N `memaudit worker` processes (one torch thread each). Every configuration gets a fresh
database, so each starts with an empty NLL cache. The roster (seeded) is made of invented names with three facts each
(occupation, citizenship, birthplace) drawn from the catalog's pools; every person is one subject audit with
`paraphrases=2, counterfactuals=30` (3 templates x 31 candidates x (the name + 2 look-alikes) = 279 sentences a fact,
837 a person; α = 1, so the generic subject cancels and is not scored) and no near-duplicate embedding.

Reported per configuration: wall time from POST /batches to the last audit's end, people per minute, the speed-up
over 1 worker, and the queue wait (audit created → started) of one single audit submitted when 25 % of the batch has
finished, two ways: **fair** (POST /audits: the interactive queue, which workers serve first) and **FIFO** (the same
audit submitted as a one-person batch of the same key: behind the whole batch on its lane, what one shared queue
would give).
For smollm2-135m: seconds per person and per scored sentence (the cost model of docs/batches.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

import httpx

from tests.support.servers import free_port, start_postgres, start_redis, wait_healthy

REPO = Path(__file__).resolve().parent.parent

OPTIONS = {"paraphrases": 2, "counterfactuals": 30, "near_duplicates": False}
FIRST = [
    "Aldra",
    "Benno",
    "Cyrille",
    "Dagny",
    "Eamon",
    "Fenna",
    "Gorik",
    "Hestia",
    "Ilvo",
    "Jorun",
    "Kasimir",
    "Liesl",
    "Marek",
    "Nyssa",
    "Oswin",
    "Perrin",
    "Quilla",
    "Rurik",
    "Sabeth",
    "Tamsin",
]
LAST = [
    "Ashgrove",
    "Brackwater",
    "Calloway",
    "Dunmere",
    "Elsworth",
    "Fairholt",
    "Greystoke",
    "Hollin",
    "Ivesby",
    "Jarrow",
    "Kestrel",
    "Lindqvist",
    "Marlowe",
    "Northcott",
    "Orrin",
    "Penhallow",
    "Quarrie",
    "Rosswell",
]
DRAIN_TIMEOUT = 3600.0


@dataclass
class Row:
    model: str
    workers: int
    people: int
    seconds: float
    people_per_min: float
    speedup: float | None
    sentences_scored: int
    ms_per_sentence: float
    fair_wait_s: float | None
    fifo_wait_s: float | None


def roster(n: int, seed: int) -> list[dict]:
    from core.catalog import load_catalog

    catalog, rng = load_catalog(), random.Random(seed)
    names = [f"{f} {last}" for f in FIRST for last in LAST]
    rng.shuffle(names)
    facts = lambda: {pid: rng.choice(catalog.get(pid).pool) for pid in ("P106", "P27", "P19")}  # noqa: E731
    suffix = lambda i: "" if i < len(names) else f" {i // len(names) + 1}"  # noqa: E731
    return [{"name": names[i % len(names)] + suffix(i), **facts()} for i in range(n)]


class Service:
    """Postgres and Redis for the whole run; per configuration a fresh database, an API and N workers."""

    def __init__(self, root: Path) -> None:
        self.root, self.pg, self.redis = root, start_postgres(), start_redis()
        self.procs: list[subprocess.Popen] = []

    def start(self, workers: int) -> tuple[str, str]:
        from app.auth.keys import create_key
        from app.db.engine import session_scope
        from app.migrate import migrate
        from app.settings import get_settings

        url = self.pg.create_database(f"cohort_{uuid.uuid4().hex[:8]}")
        migrate(url)
        env = {
            "MEMAUDIT_DATABASE_URL": url,
            "MEMAUDIT_REDIS_URL": self.redis.url,
            "MEMAUDIT_ENV": "test",
            "MEMAUDIT_QUEUE_NAME": f"cohort-{uuid.uuid4().hex[:6]}",
            "MEMAUDIT_TORCH_THREADS": "1",
            "MEMAUDIT_RATE_LIMIT_PER_MINUTE": "0",
            "MEMAUDIT_SUBMIT_RATE_PER_MINUTE": "0",
        }
        os.environ.update(env)
        get_settings.cache_clear()
        with session_scope() as s:
            key = create_key(s, get_settings(), "auditor", "cohort-bench")[1]
        port, full = free_port(), {**os.environ, **env}
        log = (self.root / "service.log").open("a")
        cmd = [sys.executable, "-m", "app.cli"]
        self.procs = [
            subprocess.Popen(
                [*cmd, "serve", "--port", str(port), "--log-level", "warning"],
                env=full,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        ]
        self.procs += [
            subprocess.Popen([*cmd, "worker"], env=full, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
            for _ in range(workers)
        ]
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base)
        return base, key

    def stop_processes(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=30)
        self.procs = []

    def close(self) -> None:
        self.stop_processes()
        self.redis.stop()
        self.pg.stop()


def _wait_started(http: httpx.Client, model: str, n_workers: int) -> None:
    """Every worker has loaded the model (a warm-up audit per worker, not timed): model loading is not throughput."""
    people = roster(n_workers, seed=99)
    batch = http.post("/batches", json={"model": model, "options": OPTIONS, "people": people}).json()
    _drain(http, batch["id"])


def _drain(http: httpx.Client, batch_id: str, on_progress=None) -> dict:  # noqa: ANN001
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while time.monotonic() < deadline:
        b = http.get(f"/batches/{batch_id}").json()
        if on_progress is not None:
            on_progress(b)
        if b["status"] in ("finished", "cancelled"):
            return b
        time.sleep(0.5)
    raise RuntimeError(f"batch {batch_id} did not finish in {DRAIN_TIMEOUT} s")


def _wait_s(http: httpx.Client, audit_id: str) -> float:
    a = http.get(f"/audits/{audit_id}").json()
    return (datetime.fromisoformat(a["started_at"]) - datetime.fromisoformat(a["created_at"])).total_seconds()


def measure(service: Service, model: str, workers: int, people: int, probe: bool) -> Row:
    base, key = service.start(workers)
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
            _wait_started(http, model, workers)
            singles: dict[str, str] = {}

            def probe_at_quarter(b: dict) -> None:
                p = b["progress"]
                if probe and not singles and p["succeeded"] >= people // 4:
                    one = roster(1, seed=7)[0]
                    facts = [{"property": k, "value": v} for k, v in one.items() if k != "name"]
                    body = {
                        "kind": "subject",
                        "model": model,
                        "options": OPTIONS,
                        "subject": {"name": one["name"], "facts": facts},
                    }
                    singles["fair"] = http.post("/audits", json=body).json()["id"]
                    fifo = http.post("/batches", json={"model": model, "options": OPTIONS, "people": [one]}).json()
                    singles["fifo_batch"] = fifo["id"]

            start = time.monotonic()
            batch = http.post("/batches", json={"model": model, "options": OPTIONS, "people": roster(people, 1)})
            batch.raise_for_status()
            done = _drain(http, batch.json()["id"], probe_at_quarter)
            seconds = time.monotonic() - start
            assert done["progress"]["succeeded"] == people, done
            scored = _scored(http, batch.json()["id"])
            fair = fifo = None
            if singles:
                fifo_audit = (
                    _drain(http, singles["fifo_batch"])
                    and http.get(f"/batches/{singles['fifo_batch']}/audits").json()["items"][0]["id"]
                )
                fair, fifo = _wait_s(http, singles["fair"]), _wait_s(http, fifo_audit)
    finally:
        service.stop_processes()
    return Row(
        model,
        workers,
        people,
        round(seconds, 1),
        round(60 * people / seconds, 1),
        None,
        scored,
        round(1000 * seconds * workers / max(scored, 1), 2),
        fair,
        fifo,
    )


def measure_submit(service: Service, people: int) -> dict[str, float]:
    """POST /batches of ``people`` rows with no worker running (validation, bulk insert, enqueue), then cancel."""
    base, key = service.start(0)
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=1800) as http:
            body = {"model": "groundtruth-tiny", "options": OPTIONS, "people": roster(people, 3)}
            size = len(json.dumps(body))
            start = time.monotonic()
            r = http.post("/batches", json=body)
            seconds = time.monotonic() - start
            r.raise_for_status()
            reconcile = _time_reconcile()
            start = time.monotonic()
            http.delete(f"/batches/{r.json()['id']}").raise_for_status()
            cancel = time.monotonic() - start
    finally:
        service.stop_processes()
    return {
        "people": people,
        "body_bytes": size,
        "submit_s": round(seconds, 1),
        "cancel_s": round(cancel, 2),
        "people_per_s": round(people / seconds),
        "reconcile_pass_s": reconcile,
    }


def _time_reconcile() -> float:
    """One reconciler pass (every worker runs one every 10 s) over the queued batch: it checks each audit's job."""
    from app.kinds import KINDS
    from app.queue import get_dispatcher
    from app.reliability.reconciler import reconcile_once
    from app.settings import get_settings

    start = time.monotonic()
    report = reconcile_once(get_settings(), get_dispatcher(), KINDS)
    assert not report.enqueued, "every queued audit of the batch has its job"
    return round(time.monotonic() - start, 2)


def _scored(http: httpx.Client, batch_id: str) -> int:
    total, page = 0, 1
    while True:
        items = http.get(f"/batches/{batch_id}/audits", params={"page": page, "page_size": 200}).json()["items"]
        total += sum(a["summary"]["scoring"]["scored"] for a in items if a["summary"])
        if len(items) < 200:
            return total
        page += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=200, help="people on groundtruth-tiny (0: skip those runs)")
    parser.add_argument("--workers", type=int, action="append", help="worker processes (repeatable; default 1 2 4)")
    parser.add_argument("--smollm2", type=int, default=8, help="people on smollm2-135m, 1 worker (0: skip)")
    parser.add_argument("--submit", type=int, default=20_000, help="also time POST /batches of this many people")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "results_cohort.json")
    args = parser.parse_args()
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"cohort-bench-{uuid.uuid4().hex[:6]}"
    root.mkdir(parents=True)
    service, rows, submit = Service(root), [], None
    try:
        if args.submit:
            submit = measure_submit(service, args.submit)
            print(f"submit: {submit}", flush=True)
        for n in (args.workers or [1, 2, 4]) if args.people else []:
            rows.append(measure(service, "groundtruth-tiny", n, args.people, probe=True))
            print(format_row(rows[-1]), flush=True)
        if args.smollm2:
            rows.append(measure(service, "smollm2-135m", 1, args.smollm2, probe=False))
            print(format_row(rows[-1]), flush=True)
    finally:
        service.close()
    base = {r.workers: r.people_per_min for r in rows if r.model == "groundtruth-tiny"}
    for r in rows:
        if r.model == "groundtruth-tiny" and 1 in base:
            r.speedup = round(r.people_per_min / base[1], 2)
    print(
        "\n| model | workers | people | s | people/min | vs 1 worker | scored | worker-ms/sentence | single audit "
        "wait: fair | FIFO |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    for r in rows:
        print(format_row(r))
    if submit:
        print(
            f"\nPOST /batches of {submit['people']:,} people ({submit['body_bytes']:,} bytes of JSON): "
            f"{submit['submit_s']} s ({submit['people_per_s']:,} people/s); DELETE (cancel): {submit['cancel_s']} s; "
            f"one reconciler pass over them: {submit['reconcile_pass_s']} s"
        )
    args.out.write_text(json.dumps({"runs": [asdict(r) for r in rows], "submit": submit}, indent=1) + "\n")


def format_row(r: Row) -> str:
    wait = lambda s: "–" if s is None else f"{s:.1f} s"  # noqa: E731
    return (
        f"| {r.model} | {r.workers} | {r.people} | {r.seconds} | {r.people_per_min} | "
        f"{'–' if r.speedup is None else f'{r.speedup}x'} | {r.sentences_scored:,} | {r.ms_per_sentence} | "
        f"{wait(r.fair_wait_s)} | {wait(r.fifo_wait_s)} |"
    )


if __name__ == "__main__":
    main()
