"""Cost of a null fact: full null facts (one per fictitious person) against the pseudo-truth shortcut (every scored
candidate of a person stands in as the truth), side by side, through the service (POST a `null` audit).

    python -m benchmarks.null_cost --model groundtruth-tiny --people 20
    python -m benchmarks.null_cost --model smollm2-135m --people 3 --paraphrases 2 --counterfactuals 20

Each method audits the same K people for one property (default P106, occupation) on a fresh database (cold NLL
cache: every sentence is scored), after loading the model; it reports the seconds per person and per null fact,
and the ratio. Both methods score the same sentences per person — the shortcut only reads more null facts out of
them (one per candidate), which is why it is valid only where the name says nothing about the value.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def client_for(db: Path, threads: int) -> Any:
    os.environ.update({"MEMAUDIT_DATABASE_URL": f"sqlite:///{db}", "MEMAUDIT_TORCH_THREADS": str(threads)})
    os.environ.pop("MEMAUDIT_REDIS_URL", None)
    from fastapi.testclient import TestClient

    from app.auth.keys import create_key
    from app.db.engine import session_scope
    from app.main import create_app
    from app.migrate import migrate
    from app.queue import _dispatcher_for
    from app.settings import get_settings

    get_settings.cache_clear()  # a fresh database per method: every sentence is scored (cold NLL cache)
    _dispatcher_for.cache_clear()
    migrate()
    with session_scope() as s:
        _, key = create_key(s, get_settings(), "admin", "null-cost")
    client = TestClient(create_app())
    client.headers["Authorization"] = f"Bearer {key}"
    return client


def run_method(client: Any, args: argparse.Namespace, method: str) -> dict[str, Any]:
    body = {
        "kind": "null",
        "model": args.model,
        "properties": [args.property],
        "method": method,
        "options": {"paraphrases": args.paraphrases, "counterfactuals": args.counterfactuals, "seed": 1},
        "facts_per_property": args.people if method == "full" else 1,
        "min_people": args.people,
    }
    r = client.post("/audits", json=body)
    r.raise_for_status()
    audit_id = r.json()["id"]
    while (audit := client.get(f"/audits/{audit_id}").json())["status"] in ("queued", "running"):
        time.sleep(2)
    if audit["status"] != "succeeded":
        raise SystemExit(f"{method}: null audit {audit['status']}: {audit['error']}")
    cost = audit["summary"]["cost"]
    dist = client.get(f"/audits/{audit_id}/null").json()["distributions"][0]
    return {
        "method": method,
        "people": dist["people"],
        "null_facts": dist["null_facts"],
        "seconds": cost["seconds"],
        "sentences_scored": cost["scored"],
        "seconds_per_person": cost["seconds"] / dist["people"],
        "seconds_per_null_fact": cost["seconds"] / dist["null_facts"],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="groundtruth-tiny")
    ap.add_argument("--property", default="P106")
    ap.add_argument("--people", type=int, default=20)
    ap.add_argument("--paraphrases", type=int, default=3)
    ap.add_argument("--counterfactuals", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    results = []
    for method in ("full", "pseudo"):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(run_method(client_for(Path(tmp) / "cost.sqlite3", args.threads), args, method))
    full, pseudo = results
    print(json.dumps(results, indent=1))
    print(
        f"\n{args.model}, {args.property}, {args.people} people, baseline + {args.paraphrases} paraphrases, "
        f"{args.counterfactuals} counterfactuals:"
    )
    for r in results:
        print(
            f"  {r['method']:>6}: {r['null_facts']:>5} null facts, {r['seconds']:.1f} s, "
            f"{r['seconds_per_person']:.2f} s/person, {r['seconds_per_null_fact']:.4f} s/null fact"
        )
    print(
        f"  pseudo-truths give {pseudo['null_facts'] / full['null_facts']:.0f}x the null facts; a null fact costs "
        f"{full['seconds_per_null_fact'] / pseudo['seconds_per_null_fact']:.0f}x less"
    )


if __name__ == "__main__":
    main()
