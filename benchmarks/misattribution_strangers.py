"""Misattribution's false alarms on people a model cannot confuse with anyone (issue 42), measured on enough facts
to bound them: groundtruth-tiny audited, through the service, for strangers — fictitious people whose first and last
names are no trained or held-out person's (the fictitious-name generator, seed 4242, as the e2e tests draw them) —
in scoring and in generation mode, at the default verdict (p <= 0.01).

    python -m benchmarks.misattribution_strangers                        # 200 strangers x 5 properties, both modes
    python -m benchmarks.misattribution_strangers --mode generation     # one mode again (the other's entry kept)

Scoring: the CLI's default configuration, judged by the null shipped for groundtruth-tiny (200 null facts per
property, 420 for occupations). Generation: the e2e test's sampling (K 10 answers of the baseline's text,
temperature 1, 12 tokens), judged by a generation null of the service's default size, computed here. Reports per
mode the flagged rate with its 95 % Clopper-Pearson interval, per property, and the false values said. The e2e tests
(tests/e2e/test_groundtruth_misattribution.py, tests/e2e/test_generation.py) audit 40 strangers (200 facts), which
cannot bound the rate under 2 % at a 1 % level (2/200 gives 3.6 %): this run can. Writes
benchmarks/results/misattribution_strangers.json.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.service import rate, setup, wait
from core import defaults
from core.catalog import load_catalog
from core.names.fictitious import cohort

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "workers" / "groundtruth" / "manifest.json"
SEED = 4242  # the e2e tests' stranger cohort: its first 40 are theirs
GENERATION = {"samples": 10, "templates": 1, "temperature": 1.0, "max_tokens": 12, "form": "completion"}
OPTIONS = {
    "scoring": {"paraphrases": defaults.PARAPHRASES, "counterfactuals": defaults.COUNTERFACTUALS, "context": False},
    "generation": {"mode": "generation", "counterfactuals": 20, "generation": GENERATION},
}


def strangers(manifest: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The first n people of the cohort whose names share no part with a trained or held-out person's."""
    pids = sorted(manifest["properties"])
    parts = {p for person in manifest["trained"] + manifest["held_out"] for p in person["name"].split()}
    people: list[dict[str, Any]] = []
    for person in cohort(n * 3, pids, load_catalog(), seed=SEED):  # bounded: a third of the draws is ample
        if not parts & set(person.name.split()):
            people.append({"name": person.name, "facts": [{"property": p, "value": person.facts[p]} for p in pids]})
        if len(people) == n:
            return people
    raise SystemExit(f"only {len(people)} strangers among {n * 3} draws of seed {SEED}")


def measure(client: Any, people: Sequence[dict[str, Any]], mode: str, poll: float) -> dict[str, Any]:
    started = time.monotonic()
    ids = []
    for p in people:
        body = {"kind": "subject", "model": "groundtruth-tiny", "subject": p, "options": OPTIONS[mode]}
        r = client.post("/audits", json=body)
        r.raise_for_status()
        ids.append(r.json()["id"])
    wait(client, ids, f"{mode} strangers", poll)
    first = client.get(f"/audits/{ids[0]}/facts").json()
    nulls = sorted({n["null_audit_id"] for n in first["calibration"]["nulls"] if n["null_audit_id"]})
    wait(client, nulls, f"{mode} null", poll)
    facts = [f for i in ids for f in client.get(f"/audits/{i}/facts").json()["facts"]]
    blocks = [(f["property"], f["misattribution"]) for f in facts]
    unjudged = [b for _, b in blocks if not b or b.get("uncalibrated")]
    judged = [(pid, b) for pid, b in blocks if b and not b.get("uncalibrated")]
    flagged = [(pid, b) for pid, b in judged if b["misattributed"]]
    by_property = {
        pid: rate(sum(b["misattributed"] for q, b in judged if q == pid), sum(q == pid for q, _ in judged))
        for pid in sorted({pid for pid, _ in judged})
    }
    return {
        "options": OPTIONS[mode],
        "null_facts": sorted({n["null_facts"] for n in first["calibration"]["nulls"]} - {None}),
        "null_sources": sorted({n["source"] for n in first["calibration"]["nulls"]} - {None}),
        "people": len(people),
        "facts": len(facts),
        "unjudged": len(unjudged),
        "misattributed_p01": rate(len(flagged), len(judged)),
        "by_property": by_property,
        "flagged": [{"property": pid, "value": b["value"], "p_value": b["p_value"]} for pid, b in flagged],
        "seconds": round(time.monotonic() - started),
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strangers", type=int, default=200, help="people (x 5 properties each; default 200)")
    ap.add_argument("--mode", choices=("scoring", "generation", "both"), default="both")
    ap.add_argument("--db", type=Path, default=REPO / "var" / "misattribution-strangers.sqlite3")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--poll", type=float, default=15)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "misattribution_strangers.json")
    args = ap.parse_args(argv)
    if not 1 <= args.strangers <= 2000:
        raise SystemExit("--strangers: between 1 and 2000")
    people = strangers(json.loads(MANIFEST.read_text(encoding="utf-8")), args.strangers)
    client = setup(args.db, args.threads, None, "misattribution-strangers")
    result: dict[str, Any] = {"model": "groundtruth-tiny", "seed": SEED}
    if args.mode != "both" and args.out.is_file():  # one mode measured again: the other's entry is kept
        before = json.loads(args.out.read_text(encoding="utf-8"))
        if {k: before.get(k) for k in result} == result:
            result |= {m: before[m] for m in ("scoring", "generation") if m in before and m != args.mode}
    for mode in ("scoring", "generation") if args.mode == "both" else (args.mode,):
        result[mode] = measure(client, people, mode, args.poll)
        r = result[mode]["misattributed_p01"]
        print(f"{mode}: {r['k']}/{r['n']} misattributed at p <= 0.01 (95 % CI {r['ci95'][0]:.4f}-{r['ci95'][1]:.4f})")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
