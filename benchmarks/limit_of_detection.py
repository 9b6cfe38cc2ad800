"""The audit's limit of detection: how many times must a model have seen a fact before the default verdict finds it?

    nice -n 10 python -m benchmarks.limit_of_detection                      # every person of the manifest
    python -m benchmarks.limit_of_detection --people 4 --null-facts 20      # a small slice (a smoke run)
    python -m benchmarks.limit_of_detection --mode generation               # asked, not scored (issue 41)

Audits every invented person of ``smollm2-taught`` (workers/taught/manifest.json: each fact's dose, 0-64 exposures
in training, and its phrasing, the audited sentence repeated or varied paraphrases the audit never reads) through
the service (HTTP API -> embedded worker -> stored results -> the null the submission queued), at the API's default
options, and reads each fact's default verdict (``memorized``: p <= 0.01 against the null). Reports, with 95 %
Clopper-Pearson intervals: the detection rate per dose x property x phrasing and per dose x phrasing; the
false-positive rate on the facts nobody was taught (dose 0: the never-seen people, and the dose-0 facts of taught
people, apart); LoD50 and LoD90 (the dose at which detection reaches 50 % / 90 %), from a logistic fit of detection
on log2(dose) over doses >= 1, per phrasing and pooled, beside the smallest tested dose whose rate and every higher
dose's rate reach the level. Writes benchmarks/results/limit_of_detection.json (``--out``).

The manifest is read here only, never by the audit. The database (``--db``) keeps the NLL cache and the null: a rerun
rescores nothing it has scored.

``--tail-share 4`` reads the same audits with the verdict of before issue 40's power fixes: the null's fitted tail
over its top quarter, not its top eighth (core.measures.null.tail_p_value). For the taught people's facts (one value
each) that is the only fix that changes a verdict (the others concern facts with values in and out of the pool and
the forget set's export rule), so on a database that holds a run it scores nothing and writes
``limit_of_detection_before.json`` beside the default's.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.service import rate, setup, wait
from core.measures import null as null_measures
from core.measures.null import TAIL_SHARE

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "workers" / "taught" / "manifest.json"
PIDS = ("P106", "P27", "P19", "P21", "P1412")
LEVELS = (0.5, 0.9)


def people_of(manifest: dict[str, Any], limit: int | None) -> list[dict[str, Any]]:
    """The manifest's people, a slice of ``limit`` taking taught and never-seen people alike (every other one)."""
    people = manifest["people"]
    if limit is None or limit >= len(people):
        return people
    taught = [p for p in people if not p["unseen"]]
    unseen = [p for p in people if p["unseen"]]
    picked = unseen[: max(1, limit // 4)]
    return taught[: limit - len(picked)] + picked


def audit_people(client: Any, model: str, people: Iterable[dict[str, Any]], mode: str = "scoring") -> list[str]:
    """One subject audit per person, every fact, the API's default options (only ``mode`` sent, if not scoring)."""
    ids = []
    for p in people:
        facts = [{"property": pid, "value": p["facts"][pid]} for pid in PIDS]
        body = {"kind": "subject", "model": model, "subject": {"name": p["name"], "facts": facts}}
        if mode != "scoring":
            body["options"] = {"mode": mode}
        r = client.post("/audits", json=body)
        r.raise_for_status()
        ids.append(r.json()["id"])
    return ids


def outcomes(people: Sequence[dict[str, Any]], pages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per fact: its dose, property, phrasing, whether its person was never seen, and the verdicts."""
    rows = []
    for person, page in zip(people, pages, strict=True):
        for fact in page["facts"]:
            pid = fact["property"]
            cal = fact.get("calibration") or {}
            rows.append(
                {
                    "person": person["name"],
                    "property": pid,
                    "dose": person["doses"][pid],
                    "phrasing": person["phrasing"],
                    "unseen": person["unseen"],
                    "memorized": bool(cal.get("memorized")),
                    "p_value": cal.get("p_value"),
                    "lenient": bool(fact["lenient"]),
                }
            )
    return rows


def logistic_lod(rows: Sequence[dict[str, Any]], levels: Sequence[float] = LEVELS) -> dict[str, Any]:
    """Fit P(detected) = 1 / (1 + exp(-(a + b log2 dose))) over doses >= 1 (Newton's method, a tiny ridge so that
    a separable sample still converges) and solve for each level. A level the fit does not reach inside the tested
    doses is reported as beyond them ("> 64" or "< 1"), not extrapolated."""
    data = [(math.log2(r["dose"]), 1.0 if r["memorized"] else 0.0) for r in rows if r["dose"] >= 1]
    if not data:
        return {"fit": None, **{f"lod{round(q * 100)}": None for q in levels}}
    a, b = 0.0, 0.0
    for _ in range(100):
        ga = gb = haa = hab = hbb = 0.0
        for x, y in data:
            p = 1 / (1 + math.exp(-(a + b * x)))
            w = p * (1 - p)
            ga, gb = ga + (y - p), gb + (y - p) * x
            haa, hab, hbb = haa + w, hab + w * x, hbb + w * x * x
        ga, gb, haa, hbb = ga - 1e-3 * a, gb - 1e-3 * b, haa + 1e-3, hbb + 1e-3
        det = haa * hbb - hab * hab
        da, db = (hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det
        a, b = a + da, b + db
        if abs(da) + abs(db) < 1e-9:
            break
    top = max(x for x, _ in data)
    out: dict[str, Any] = {"fit": {"intercept": round(a, 4), "slope_per_doubling": round(b, 4)}}
    for q in levels:
        key = f"lod{round(q * 100)}"
        if b <= 0:
            out[key] = f"> {2**top:g}"
            continue
        x = (math.log(q / (1 - q)) - a) / b
        out[key] = f"> {2**top:g}" if x > top else ("< 1" if x < 0 else round(2**x, 1))
    return out


def empirical_lod(by_dose: dict[int, dict[str, Any]], q: float) -> int | str:
    """The smallest tested dose >= 1 whose detection rate, and every higher dose's, is at least q."""
    doses = sorted(d for d in by_dose if d >= 1 and by_dose[d]["n"])
    found: int | str = f"> {doses[-1]}" if doses else "none"
    for d in reversed(doses):
        if by_dose[d]["rate"] < q:
            break
        found = d
    return found


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def cell(sel: Iterable[dict[str, Any]], key: str = "memorized") -> dict[str, Any]:
        sel = list(sel)
        return rate(sum(r[key] for r in sel), len(sel))

    doses = sorted({r["dose"] for r in rows})
    out: dict[str, Any] = {"detection": {}, "lod": {}}
    for phrasing in ("repeated", "varied", "pooled"):
        sel = [r for r in rows if not r["unseen"] and phrasing in ("pooled", r["phrasing"])]
        by_dose = {d: cell(r for r in sel if r["dose"] == d) for d in doses}
        out["detection"][phrasing] = {
            "all": {str(d): v for d, v in by_dose.items()},
            "lenient": {str(d): cell((r for r in sel if r["dose"] == d), "lenient") for d in doses},
            **{
                pid: {str(d): cell(r for r in sel if r["dose"] == d and r["property"] == pid) for d in doses}
                for pid in PIDS
            },
        }
        out["lod"][phrasing] = {
            "logistic": logistic_lod(sel),
            **{f"empirical_lod{round(q * 100)}": empirical_lod(by_dose, q) for q in LEVELS},
        }
    # per property, phrasings pooled: a fact the name suggests (citizenship, language, gender) is said from the name
    # alone, which the null cancels, so its limit differs from one no name hints at (occupation)
    taught = [r for r in rows if not r["unseen"]]
    out["lod_by_property"] = {}
    for pid in PIDS:
        sel = [r for r in taught if r["property"] == pid]
        by_dose = {d: cell(r for r in sel if r["dose"] == d) for d in doses}
        out["lod_by_property"][pid] = {
            "logistic": logistic_lod(sel),
            **{f"empirical_lod{round(q * 100)}": empirical_lod(by_dose, q) for q in LEVELS},
        }
    unseen = [r for r in rows if r["unseen"]]
    taught_zero = [r for r in rows if not r["unseen"] and r["dose"] == 0]
    out["false_positives"] = {
        "never_seen_people": {
            "all": cell(unseen),
            **{pid: cell(r for r in unseen if r["property"] == pid) for pid in PIDS},
        },
        "dose0_facts_of_taught_people": cell(taught_zero),
        "all_dose0": cell(unseen + taught_zero),
    }
    return out


def null_rates(pages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The null's own false-positive rate per property at the default policy, as the facts page states it."""
    out = {}
    for page in pages:
        for fact in page["facts"]:
            fpr = ((fact.get("calibration") or {}).get("fpr") or {}).get("pvalue")
            if fpr is not None:
                out.setdefault(fact["property"], fpr)
    return out


def print_table(summary: dict[str, Any]) -> None:
    print("\ndetected at the default verdict (p <= 0.01), k/n per dose; pooled over properties")
    for phrasing in ("repeated", "varied", "pooled"):
        cells = summary["detection"][phrasing]["all"]
        row = "  ".join(f"{d}:{c['k']}/{c['n']}" for d, c in cells.items())
        lod = summary["lod"][phrasing]
        print(f"  {phrasing:8s} {row}   LoD50 {lod['logistic']['lod50']}  LoD90 {lod['logistic']['lod90']}")
    for pid, lod in summary.get("lod_by_property", {}).items():
        cells = summary["detection"]["pooled"][pid]
        row = "  ".join(f"{d}:{c['k']}/{c['n']}" for d, c in cells.items())
        print(f"  {pid:8s} {row}   LoD50 {lod['logistic']['lod50']}  LoD90 {lod['logistic']['lod90']}")
    fp = summary["false_positives"]
    print(f"  false positives: never-seen people {fp['never_seen_people']['all']}, dose-0 facts {fp['all_dose0']}")


def markdown(summary: dict[str, Any], label: str) -> str:
    """The full table of one results file in Markdown: per phrasing, every property and all five pooled, k/n per dose
    (a dose with no fact of that kind says –), the logistic LoD50 / LoD90 of each phrasing's five-pooled row and of each
    property with phrasings pooled; then the false positives on dose 0."""
    doses = list(summary["detection"]["pooled"]["all"])
    lines = [
        f"| {label} | facts | " + " | ".join(doses) + " | LoD50 / LoD90 |",
        "|---|---|" + "---|" * len(doses) + "---|",
    ]
    for phrasing in ("repeated", "varied", "pooled"):
        cells = summary["detection"][phrasing]
        for i, key in enumerate((*PIDS, "all")):
            row = [f"{c['k']}/{c['n']}" if c["n"] else "–" for c in cells[key].values()]
            if key == "all":
                lod = summary["lod"][phrasing]["logistic"]
            else:  # per property: phrasings pooled only (benchmark summary's lod_by_property)
                lod = summary.get("lod_by_property", {}).get(key, {}).get("logistic") if phrasing == "pooled" else None
            lod_text = f"{lod['lod50']} / {lod['lod90']}" if lod else ""
            name = "five pooled" if key == "all" else key
            lines.append(f"| {phrasing if i == 0 else ''} | {name} | " + " | ".join(row) + f" | {lod_text} |")
    fp = summary["false_positives"]
    never, zero = fp["never_seen_people"]["all"], fp["all_dose0"]
    lines.append(
        f"\nFalse positives: never-seen people {never['k']}/{never['n']}, every dose-0 fact {zero['k']}/{zero['n']} "
        f"(95 % CI {zero['ci95'][0]:.1%}–{zero['ci95'][1]:.1%})."
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-taught")
    ap.add_argument("--manifest", type=Path, default=MANIFEST)
    ap.add_argument("--db", type=Path, default=REPO / "var" / "limit-of-detection.sqlite3")
    ap.add_argument("--people", type=int, default=None, help="audit a slice of this many people (default: all)")
    ap.add_argument("--null-facts", type=int, default=None, help="null facts per property (default: the service's)")
    ap.add_argument("--mode", choices=("scoring", "generation"), default="scoring", help="how the model is probed")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--poll", type=float, default=30)
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default benchmarks/results/limit_of_detection.json (with --tail-share: limit_of_detection_before.json)",
    )
    ap.add_argument(
        "--tail-share",
        type=int,
        default=TAIL_SHARE,
        help=f"fit the null's tail to its top 1/N (default {TAIL_SHARE}, the service's; 4: before issue 40's fixes)",
    )
    ap.add_argument("--markdown", action="store_true", help="print --out's full table in Markdown; audit nothing")
    ap.add_argument(
        "--summarize", action="store_true", help="recompute the summary of --out from its facts; audit nothing"
    )
    args = ap.parse_args(argv)
    if args.out is None:
        name = "limit_of_detection" + ("" if args.tail_share == TAIL_SHARE else "_before") + ".json"
        args.out = REPO / "benchmarks" / "results" / name
    if args.markdown:
        result = json.loads(args.out.read_text(encoding="utf-8"))
        print(markdown(result, result["options"]))
        return
    if args.summarize:
        result = json.loads(args.out.read_text(encoding="utf-8"))
        result |= summarize(result["facts"])
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print_table(result)
        return
    if args.tail_share != TAIL_SHARE:
        # every p-value the service reads goes through this module function (EmpiricalNull.p_value and its
        # leave-one-out rates), so the verdicts below are the service's with the earlier tail
        null_measures.tail_p_value = functools.partial(null_measures.tail_p_value, share=args.tail_share)
    manifest = json.loads(args.manifest.read_text(encoding="utf-8"))
    people = people_of(manifest, args.people)
    client = setup(args.db, args.threads, args.null_facts, "limit-of-detection")
    started, cpu = time.monotonic(), time.process_time()
    ids = audit_people(client, args.model, people, args.mode)
    wait(client, ids, "taught people", args.poll)
    audits_s = (time.monotonic() - started, time.process_time() - cpu)
    first = client.get(f"/audits/{ids[0]}/facts").json()
    nulls = sorted({n["null_audit_id"] for n in first["calibration"]["nulls"] if n["null_audit_id"]})
    wait(client, nulls, "null", args.poll)
    pages = [client.get(f"/audits/{i}/facts").json() for i in ids]
    rows = outcomes(people, pages)
    result = {
        "model": args.model,
        "manifest_seed": manifest["recipe"]["seed"],
        "people": len(people),
        "null_facts_per_property": args.null_facts or "service default",
        "options": "the API's defaults"
        + ("" if args.mode == "scoring" else f", mode {args.mode}")
        + ("" if args.tail_share == TAIL_SHARE else f", the null's tail fitted to its top 1/{args.tail_share}"),
        "seconds": {
            "audits_wall": round(audits_s[0]),
            "audits_cpu": round(audits_s[1]),
            "total_wall": round(time.monotonic() - started),
            "total_cpu": round(time.process_time() - cpu),
        },
        "null_fpr": null_rates(pages),
        **summarize(rows),
        "facts": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print_table(result)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
