"""Null calibration on smollm2-135m: well-known people vs fictitious people whose names fit their facts, under
both look-alike schemes, through the service (HTTP API -> embedded worker -> stored results -> nulls).

    python -m benchmarks.calibration_cohorts          # both schemes, the cohorts of calibration_cohorts.json
    python -m benchmarks.calibration_cohorts --schemes same_origin --null-facts 100

For each scheme: audit every person of both cohorts (occupation, citizenship, birthplace, gender, language), read
their facts (which queues the matching null audit: fictitious people whose names fit their facts), wait for the
null, read the calibrated facts and the cohort statistics. Per scheme, cohort and property it reports the rate under
the default policy (p <= 0.01) and the lenient rate, beside the null's false-positive rate of each, with 95 %
Clopper-Pearson intervals. Writes benchmarks/results/results_calibration_cohorts.json.

To fit a shared 2-core CPU the audits probe the baseline + 2 paraphrases with 20 counterfactuals (the service's
default is every paraphrase and 100) and the nulls hold 100 null facts per property (default 200). The database
(--db) keeps the NLL cache, so a rerun rescores nothing.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.service import rate, setup, wait

REPO = Path(__file__).resolve().parent.parent

PIDS = ("P106", "P27", "P19", "P21", "P1412")


def audit_cohort(client: Any, model: str, people: list[dict], options: dict) -> list[str]:
    ids = []
    for person in people:
        body = {"kind": "subject", "model": model, "options": options, "subject": person}
        r = client.post("/audits", json=body)
        r.raise_for_status()
        ids.append(r.json()["id"])
    return ids


def summarize(pages: list[dict]) -> dict[str, Any]:
    """Per property: the cohort's default-policy and lenient rates, and the null's FPR of each."""
    out = {}
    for pid in PIDS:
        facts = [f for p in pages for f in p["facts"] if f["property"] == pid]
        cal = [f["calibration"] for f in facts]
        fpr = cal[0]["fpr"]
        out[pid] = {
            "facts": len(facts),
            "memorized_p01": rate(sum(c["memorized"] for c in cal), len(cal)),
            "lenient": rate(sum(f["lenient"] for f in facts), len(facts)),
            "mean_share": round(sum(f["share"] for f in facts) / len(facts), 4),
            "null_fpr_p01": fpr["pvalue"],
            "null_fpr_lenient": fpr["lenient"],
            "misattribution": misattribution(facts),
        }
    return out


def misattribution(facts: list[dict]) -> dict[str, Any]:
    """The misattribution verdict (issue 42) over these facts: flagged at p <= 0.01 among those judged, how many could
    not be judged (and why), the flagged facts' preferred false values and how many carry the namesake mark."""
    blocks = [f.get("misattribution") for f in facts]
    judged = [b for b in blocks if b and not b.get("uncalibrated")]
    flagged = [b for b in judged if b.get("misattributed")]
    reasons: dict[str, int] = {}
    for b in blocks:
        if not b or b.get("uncalibrated"):
            why = (b or {}).get("reason") or "no block (the null is not ready)"
            reasons[why] = reasons.get(why, 0) + 1
    values: dict[str, int] = {}
    for b in flagged:
        values[b.get("value") or "?"] = values.get(b.get("value") or "?", 0) + 1
    return {
        "misattributed_p01": rate(len(flagged), len(judged)),
        "uncalibrated": reasons,
        "namesake": sum(bool(b.get("namesake")) for b in flagged),
        "values": dict(sorted(values.items(), key=lambda kv: -kv[1])),
    }


def run_scheme(
    client: Any, model: str, cohorts: dict, scheme: str, options: dict, groups: dict[str, tuple[str, ...]] | None = None
) -> dict[str, Any]:
    """``groups``: the cohorts of calibration_cohorts.json audited as "famous" (the known) and as "fictitious" (the
    unknown), each key also reported apart under ``by_cohort``."""
    groups = groups or {"famous": ("famous",), "fictitious": ("fictitious",)}
    opts = options | {"lookalikes": scheme}
    by_key = {key: audit_cohort(client, model, cohorts[key], opts) for keys in groups.values() for key in keys}
    ids = {name: [i for key in keys for i in by_key[key]] for name, keys in groups.items()}
    started = time.monotonic()
    wait(client, ids["famous"] + ids["fictitious"], f"{scheme} cohorts", 60)
    cohort_seconds = time.monotonic() - started
    first = client.get(f"/audits/{ids['famous'][0]}/facts").json()  # queues the null
    nulls = sorted({n["null_audit_id"] for n in first["calibration"]["nulls"] if n["null_audit_id"]})
    for audit_id in ids["famous"] + ids["fictitious"]:
        client.get(f"/audits/{audit_id}/facts")
    started = time.monotonic()
    wait(client, nulls, f"{scheme} null", 60)
    null_seconds = time.monotonic() - started
    result: dict[str, Any] = {
        "options": opts,
        "seconds": {"cohorts": round(cohort_seconds), "null": round(null_seconds)},
    }
    page = {i: client.get(f"/audits/{i}/facts").json() for i in ids["famous"] + ids["fictitious"]}
    for name, audit_ids in ids.items():
        pages = [page[i] for i in audit_ids]
        used = [client.get(f"/audits/{i}").json()["summary"]["lookalikes"] for i in audit_ids]
        stats = client.get("/cohort-stats", params={"audit_id": audit_ids}).json()
        result[name] = {
            "people": len(audit_ids),
            "lookalikes_used": {s: used.count(s) for s in set(used)},
            "per_property": summarize(pages),
            "cohort": stats["cohort"],
            "null": stats["null"],
        }
    if any(keys != (name,) for name, keys in groups.items()):
        result["cohorts"] = {name: list(keys) for name, keys in groups.items()}
        result["by_cohort"] = {key: summarize([page[i] for i in audit_ids]) for key, audit_ids in by_key.items()}
    result["null_audits"] = [client.get(f"/audits/{n}/null").json() for n in nulls]
    return result


def print_table(results: dict[str, Any]) -> None:
    for scheme, res in results.items():
        print(f"\nlook-alikes: {scheme}  (p <= 0.01 rate | lenient rate; null FPR in brackets, 95 % CI)")
        for pid in PIDS:
            row = [pid]
            for name in ("famous", "fictitious"):
                p = res[name]["per_property"][pid]
                row.append(f"{name} {p['memorized_p01']['rate']:.2f} | {p['lenient']['rate']:.2f}")
            p = res["famous"]["per_property"][pid]
            fpr, fl = p["null_fpr_p01"], p["null_fpr_lenient"]
            row.append(
                f"null {fpr['rate']:.3f} [{fpr['ci95'][0]:.3f}, {fpr['ci95'][1]:.3f}] | "
                f"{fl['rate']:.2f} [{fl['ci95'][0]:.2f}, {fl['ci95'][1]:.2f}]"
            )
            print("  " + "   ".join(row))
        for name in ("famous", "fictitious"):
            said = {
                pid: f"{m['misattributed_p01']['k']}/{m['misattributed_p01']['n']}"
                for pid in PIDS
                for m in [res[name]["per_property"][pid]["misattribution"]]
            }
            print(f"  misattributed at p <= 0.01, {name}: {said}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--db", type=Path, default=REPO / "var" / "calibration-cohorts.sqlite3")
    ap.add_argument("--schemes", nargs="+", default=["reversed", "same_origin"])
    ap.add_argument("--null-facts", type=int, default=100)
    ap.add_argument("--paraphrases", type=int, default=2)
    ap.add_argument("--counterfactuals", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="people per cohort (default: all)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "results_calibration_cohorts.json")
    ap.add_argument("--known", default="famous", help="cohort keys audited as the known cohort, comma-separated")
    ap.add_argument(
        "--unknown", default="fictitious", help="cohort keys audited as the unknown cohort, comma-separated"
    )
    args = ap.parse_args(argv)
    groups = {"famous": tuple(args.known.split(",")), "fictitious": tuple(args.unknown.split(","))}
    cohorts = json.loads((REPO / "benchmarks" / "calibration_cohorts.json").read_text())
    unknown_keys = [k for keys in groups.values() for k in keys if k not in cohorts]
    if unknown_keys:
        raise SystemExit(f"--known/--unknown: no cohort {unknown_keys} in calibration_cohorts.json")
    cohorts = {k: cohorts[k][: args.limit] for keys in groups.values() for k in keys}
    client = setup(args.db, args.threads, args.null_facts, "calibration-benchmark")
    options = {"paraphrases": args.paraphrases, "counterfactuals": args.counterfactuals, "seed": 0}
    results: dict[str, Any] = {}
    for scheme in args.schemes:
        results[scheme] = run_scheme(client, args.model, cohorts, scheme, options, groups)
        args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print_table(results)


if __name__ == "__main__":
    main()
