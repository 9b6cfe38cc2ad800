"""Cost of a null fact: full null facts (one per fictitious person) against the pseudo-truth shortcut (every scored
candidate of a person stands in as the truth), side by side, through the service (POST a `null` audit).

    python -m benchmarks.null_cost --model groundtruth-tiny --people 20
    python -m benchmarks.null_cost --model smollm2-135m --people 3 --paraphrases 2 --counterfactuals 20
    python -m benchmarks.null_cost --defaults --model groundtruth-tiny --people 2   # before/after the defaults

Each method audits the same K people for one property (default P106, occupation) on a fresh database (cold NLL
cache: every sentence is scored), after loading the model; it reports the seconds per person and per null fact,
and the ratio. Both methods score the same sentences per person — the shortcut only reads more null facts out of
them (one per candidate), which is why it is valid only where the name says nothing about the value.

``--defaults``: the null of the API's default configuration for five properties (occupation, citizenship,
birthplace, sex or gender, languages; 200 null facts per property), before and after the defaults were measured
(docs/lab/2026-11-26-null-cost.md): before, every template (11) and 100 counterfactuals, with the generic subject
scored although it cancels at α = 1; after, baseline + 2 paraphrases and 20 counterfactuals, the generic subject not
scored. The sentences are counted from the service's own configurations as the null job scores them (the generic
subject's sentences once per value, not per person: ``null_sentences``); CPU seconds per sentence are measured side
by side in one run (``--people`` people of each configuration through the service, cold NLL cache, model loaded; the
process's CPU time), and the whole null's CPU time is sentences x that rate.

    python -m benchmarks.null_cost --defaults --model groundtruth-tiny --people 2 \\
        --out benchmarks/results/results_null_cost.json
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


DEFAULT_PIDS = ("P106", "P27", "P19", "P21", "P1412")
CONFIGS = {  # the subject options of each configuration
    "before": {"paraphrases": None, "counterfactuals": 100, "alpha": 0.999999},  # every template; generic scored
    "after": {"paraphrases": 2, "counterfactuals": 20, "alpha": 1.0},  # baseline + 2; the generic subject cancels
}


def null_sentences(name: str) -> dict[str, int]:
    """What the null job scores for ``name``'s null of DEFAULT_PIDS (app.nulls.config's configuration, people and
    candidates: full null facts where the name hints at the value, pseudo-truths elsewhere; out-of-pool truths
    included): per person, templates x candidates x (the subject + its look-alikes); the generic subject's sentence
    of a template and a value is the same for every person, so the job scores it once per property and value (read
    from the NLL cache after), at most templates x (pool + every out-of-pool truth). ``per_person_generic``: the
    count with a generic sentence per person, as this benchmark counted before 2026-11-28 (1.33x the "before")."""
    from app.nulls.config import null_config, out_of_pool_per_person, people_needed, resolve_method
    from app.settings import Settings
    from app.subjects.schemas import SubjectAuditOptions
    from core.catalog import load_catalog

    settings, catalog = Settings(), load_catalog()
    config = CONFIGS[name]
    options = SubjectAuditOptions(**config).model_dump(mode="json")
    out = {"people": 0, "sentences": 0, "generic_shared": 0, "per_person_generic": 0}
    for pid in DEFAULT_PIDS:
        pool = list(catalog.get(pid).pool)
        null = null_config(pid, options, options["lookalikes"], pool, resolve_method("auto", pid, options))
        people = people_needed(null, len(pool), settings)
        templates, oop = len(null["templates"]), out_of_pool_per_person(null)
        candidates = 1 + oop + min(null["counterfactuals"], len(pool) - 1)
        rows = 1 + int(null["similar_names"])  # the subject and its look-alikes: new sentences for every person
        generic = float(null["alpha"]) != 1.0  # at α = 1 the generic subject cancels and is not scored
        shared = templates * (len(pool) + people * oop) if generic else 0
        out["people"] += people
        out["sentences"] += people * templates * candidates * rows + shared
        out["generic_shared"] += shared
        out["per_person_generic"] += people * templates * candidates * (rows + generic)
    return out


def measure_rate(args: argparse.Namespace, name: str) -> float:
    """CPU seconds per scored sentence of the ``name`` configuration's null, on ``args.people`` people."""
    with tempfile.TemporaryDirectory() as tmp:
        client = client_for(Path(tmp) / f"{name}.sqlite3", args.threads)
        options = CONFIGS[name] | {"seed": 1}
        body = {"kind": "null", "model": args.model, "properties": list(DEFAULT_PIDS), "options": options}
        body |= {"facts_per_property": args.people, "min_people": args.people, "method": "full"}
        cpu = time.process_time()
        r = client.post("/audits", json=body)
        r.raise_for_status()
        audit_id = r.json()["id"]
        while (audit := client.get(f"/audits/{audit_id}").json())["status"] in ("queued", "running"):
            time.sleep(1)
        if audit["status"] != "succeeded":
            raise SystemExit(f"{name}: null audit {audit['status']}: {audit['error']}")
        return (time.process_time() - cpu) / max(1, audit["summary"]["cost"]["scored"])


def defaults(args: argparse.Namespace) -> None:
    started_load = os.getloadavg()[0]
    rows = {}
    for name in CONFIGS:
        counted = null_sentences(name)
        rate = measure_rate(args, name)
        rows[name] = counted | {"cpu_s_per_sentence": rate, "cpu_h": counted["sentences"] * rate / 3600}
    before, after = rows["before"], rows["after"]
    result = {
        "measured": time.strftime("%Y-%m-%d"),
        "model": args.model,
        "people_measured": args.people,
        "load_average_1min_at_start": round(started_load, 2),
        "configurations": CONFIGS,
        "rows": rows,
        "sentences_after_over_before": after["sentences"] / before["sentences"],
        "cpu_after_over_before": after["cpu_h"] / before["cpu_h"],
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nthe default null for {', '.join(DEFAULT_PIDS)} on {args.model} (load average {started_load:.1f}):")
    for name, r in rows.items():
        print(f"  {name:>6}: {r['people']} people, {r['sentences']:,} sentences, {r['cpu_h']:.2f} CPU-hours")
    print(
        f"  after / before: {after['sentences'] / before['sentences']:.3f} of the sentences, "
        f"{after['cpu_h'] / before['cpu_h']:.3f} of the CPU time"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="groundtruth-tiny")
    ap.add_argument("--property", default="P106")
    ap.add_argument("--people", type=int, default=20)
    ap.add_argument("--paraphrases", type=int, default=3)
    ap.add_argument("--counterfactuals", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--defaults", action="store_true", help="the default null before and after the defaults")
    ap.add_argument("--out", type=Path, default=None, help="--defaults: also write the result here (JSON)")
    args = ap.parse_args(argv)
    if args.defaults:
        return defaults(args)
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
