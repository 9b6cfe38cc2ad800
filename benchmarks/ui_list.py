"""Dashboard benchmark: the audits list page (/ui/audits) with 10,000 audits in PostgreSQL, beside the JSON list
(GET /audits) it shares its query with.

    python -m benchmarks.ui_list              # 10,000 audits, 50 loads per case
    python -m benchmarks.ui_list --audits 100000 --loads 20

Starts its own PostgreSQL (temporary, as the tests do), migrates it, inserts the audits in bulk (kinds, models and
statuses mixed, created over 100 days; half owned by one auditor key, half by another), then loads each case
``--loads`` times in process (FastAPI's TestClient: the time is the server's, from request to the last byte of the
page, with no network) after 3 warm-up loads, and reports p50 / p95 / max in milliseconds and the ratio of the
page to the JSON list. The target is a page load under 300 ms."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.support.servers import start_postgres

REPO = Path(__file__).resolve().parent.parent

KINDS = ("subject", "coverage", "capacity", "dynamics")
STATUSES = ("succeeded",) * 6 + ("failed", "cancelled", "queued", "running")
MODELS = ("groundtruth-tiny", "smollm2-135m", "hf:acme/provider-llm")


def insert_audits(n: int, owners: list[int]) -> None:
    from sqlalchemy import insert

    from app.db.engine import session_scope
    from app.db.models import Audit

    rng, start = random.Random(0), datetime.now(UTC).replace(tzinfo=None) - timedelta(days=100)
    rows = []
    for i in range(n):
        created = start + timedelta(seconds=rng.uniform(0, 100 * 86400))
        rows.append(
            {
                "id": uuid.uuid4().hex,
                "kind": rng.choice(KINDS),
                "model": rng.choice(MODELS),
                "options": {},
                "status": rng.choice(STATUSES),
                "progress_done": 10,
                "progress_total": 10,
                "owner_key_id": owners[i % len(owners)],
                "created_at": created,
                "attempts": 0,
            }
        )
    with session_scope() as s:
        for chunk in range(0, n, 2000):
            s.execute(insert(Audit), rows[chunk : chunk + 2000])


def timed(client, path: str, loads: int) -> dict[str, float]:  # noqa: ANN001
    for _ in range(3):
        assert client.get(path).status_code == 200, path
    samples = []
    for _ in range(loads):
        t0 = time.perf_counter()
        r = client.get(path)
        samples.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200, path
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return {"p50_ms": statistics.median(samples), "p95_ms": p95, "max_ms": samples[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--audits", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=50)
    args = parser.parse_args()
    pg = start_postgres()
    try:
        url = pg.create_database("bench_ui")
        os.environ.update(MEMAUDIT_DATABASE_URL=url, MEMAUDIT_ENV="test", MEMAUDIT_RATE_LIMIT_PER_MINUTE="0")
        os.environ.pop("MEMAUDIT_REDIS_URL", None)
        run(url, args)
    finally:
        pg.stop()


def run(url: str, args: argparse.Namespace) -> None:
    from fastapi.testclient import TestClient

    from app.auth.keys import create_key
    from app.db.engine import session_scope
    from app.main import create_app
    from app.migrate import migrate
    from app.settings import get_settings

    migrate(url)
    with session_scope() as s:
        (admin, admin_key), (a1, a1_key), (a2, _) = (
            create_key(s, get_settings(), r) for r in ("admin", "auditor", "auditor")
        )
        owners = [a1.id, a2.id]
    t0 = time.perf_counter()
    insert_audits(args.audits, owners)
    print(f"inserted {args.audits} audits in {time.perf_counter() - t0:.1f} s")
    since = (datetime.now(UTC) - timedelta(days=30)).date().isoformat()
    cases = [
        ("admin", "/ui/audits"),
        ("admin", "/ui/audits?kind=subject&status=succeeded"),
        ("admin", f"/ui/audits?created_from={since}&model=smollm2-135m"),
        ("admin", "/ui/audits?page=200"),
        ("auditor", "/ui/audits"),
        ("auditor", "/ui/audits?kind=coverage&status=failed"),
    ]
    results = []
    client = TestClient(create_app())  # no lifespan: nothing resumes the inserted (fake) queued audits
    for role, key in (("admin", admin_key), ("auditor", a1_key)):
        client.cookies.clear()
        page = client.get("/ui/signin")  # the sign-in form's own token (login CSRF), as a browser posts it
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        assert client.post("/ui/signin", data={"token": key, "csrf": csrf}, follow_redirects=False).status_code == 303
        for case_role, path in cases:
            if case_role == role:
                page = timed(client, path, args.loads)
                api_path = "/audits" + (path.removeprefix("/ui/audits") or "") + ("&" if "?" in path else "?")
                api = timed_api(client, key, api_path + "page_size=25", args.loads)
                results.append(
                    {
                        "role": role,
                        "page": path,
                        **page,
                        "json_p50_ms": api["p50_ms"],
                        "page_over_json": page["p50_ms"] / api["p50_ms"],
                    }
                )
    report(results, args)


def timed_api(client, key: str, path: str, loads: int) -> dict[str, float]:  # noqa: ANN001
    """The JSON list with the same filters (bearer key, no cookie); its date filter is the page's own."""
    path = path.replace("created_from=", "_from=")  # the JSON list has no date filter: leave it out
    path = "&".join(p for p in path.split("&") if not p.startswith("_from=")).replace("?_from=", "?")
    cookies = dict(client.cookies)
    client.cookies.clear()
    try:
        client.headers["Authorization"] = f"Bearer {key}"
        return timed(client, path, loads)
    finally:
        del client.headers["Authorization"]
        for k, v in cookies.items():
            client.cookies.set(k, v, path="/ui")


def report(results: list[dict], args: argparse.Namespace) -> None:
    print(f"\n{args.audits} audits in PostgreSQL, {args.loads} loads per case (in-process, server time)\n")
    print(f"{'role':8} {'page':58} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} {'JSON p50':>8} {'page/JSON':>9}")
    for r in results:
        print(
            f"{r['role']:8} {r['page']:58} {r['p50_ms']:7.1f} {r['p95_ms']:7.1f} {r['max_ms']:7.1f} "
            f"{r['json_p50_ms']:8.1f} {r['page_over_json']:9.2f}"
        )
    worst = max(r["p95_ms"] for r in results)
    print(f"\nworst p95: {worst:.1f} ms (target: under 300 ms)")
    print(json.dumps({"audits": args.audits, "loads": args.loads, "results": results}, indent=1))


if __name__ == "__main__":
    main()
