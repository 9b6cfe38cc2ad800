"""Hand-made cohorts as nulls of each other: judge each hand-made fictitious cohort (and the famous) against another
cohort of invented people with ordinary names written by another hand, and against the service's null (since
generator hand-written-1 its people are the hand-written roster, core/names/null_roster.json; before, random
combinations of Faker's name lists) — the check behind docs/measures.md, "Typical names"
(docs/lab/2026-11-27-typical-names.md).

    python -m benchmarks.verdict_power --model smollm2-135m --null-people 200 --known famous,famous_more \\
        --unknown fictitious,fictitious_more,fictitious_other --statistics z --schemes same_origin   # scores, caches
    python -m benchmarks.hand_null --out benchmarks/results/results_verdict_power_roster.json              # then this
    python -m benchmarks.hand_null --writers --out …     # each roster writer against the other three (all 775)
    python -m benchmarks.hand_null --subsets 1000 --out …  # the invented people against 1,000 random nulls of 200

Reads the NLLs that verdict_power cached (``--cache``, ``var/verdict_power_nll.sqlite3`` by default; scores
nothing) and computes the default variant (truth z, same-origin look-alikes, baseline + 2 paraphrases, 20
counterfactuals) exactly as verdict_power does; in-pool facts only. Prints, per property, each cohort's mean
statistic and, for each choice of null, how many facts of the judged cohorts reach p <= 0.01 [<= 0.05] and the null's
own leave-one-out count; against the service's null, also the invented people whose origin the null has and the
others apart (``unknown_covered``, ``unknown_other_origins``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from benchmarks import verdict_power as vp
from core.measures.null import EmpiricalNull, FactStat
from core.names.origins import ORIGINS

DEFAULT = {"statistic": "z", "scheme": "same_origin", "templates": 3, "counterfactuals": 20}
KNOWN, UNKNOWN = ("famous", "famous_more"), ("fictitious", "fictitious_more", "fictitious_other")
NULLS = {  # the null -> the cohorts judged against it
    "fictitious_other": ("fictitious", "fictitious_more", "famous", "famous_more"),
    "fictitious_more": ("fictitious_other", "fictitious", "famous", "famous_more"),
    # the service's null: since generator hand-written-1, people of the hand-written roster
    # (core/names/null_roster.json, four other writers); before, random combinations of Faker's name lists
    "null": ("fictitious", "fictitious_more", "fictitious_other", "famous", "famous_more"),
}


def origin_covered() -> Callable[[str], bool]:
    """Whether an invented person's citizenship is the country of one of the null's origins (core/names/origins.py):
    a person of another tradition is read by the origin reader as some other one, and the null has no such people."""
    countries = {o.country for o in ORIGINS}
    cohorts = json.loads((vp.REPO / "benchmarks" / "calibration_cohorts.json").read_text())
    citizenship = {
        p["name"]: next(f["value"] for f in p["facts"] if f["property"] == "P27") for k in UNKNOWN for p in cohorts[k]
    }
    return lambda name: citizenship[name] in countries


WRITER_PIDS = ("P27", "P19", "P1412")


def flagged(ps: Sequence[float]) -> list[int]:
    """[p <= 0.01, p <= 0.05, facts]."""
    return [sum(p <= 0.01 for p in ps), sum(p <= 0.05 for p in ps), len(ps)]


def store(args: argparse.Namespace, key: str, counts: str, properties: dict) -> None:
    """The result under ``key`` in ``--out`` (other keys kept), when given."""
    if args.out:
        results = json.loads(args.out.read_text()) if args.out.exists() else {}
        results[key] = {
            "measured": time.strftime("%Y-%m-%d"),
            "model": args.model,
            "variant": DEFAULT,
            "counts": counts,
            "properties": properties,
        }
        args.out.write_text(json.dumps(results, indent=1) + "\n")


def _roster_facts(
    args: argparse.Namespace, groups: tuple[str, ...]
) -> Iterator[tuple[str, list[vp.Fact], list[vp.Fact], dict[str, float]]]:
    """Per name-hinted property (WRITER_PIDS): the in-pool facts of all the roster's people as null people, the
    hand-made cohorts' in-pool facts of ``groups``, and the cached NLLs of both. The cohorts are drawn as the default
    run draws them (a null of 200 before the later cohorts): each fact's statistic depends on its own sentences only,
    so they can be judged against any part of the 775-person roster. The cohorts other than the first two come after
    the null cohort, so the roster-wide run draws only those two (775 null people would move the others' draws)."""
    from core.names.fictitious import roster_size

    vp.SCHEMES = ("same_origin",)
    facts = vp.build_facts(args.model, roster_size(), 0, ("famous",), None, ("fictitious",))
    cohorts = vp.build_facts(args.model, 200, 0, KNOWN, None, UNKNOWN)
    cache = vp.NllCache(Path(args.cache), args.model)
    for pid in WRITER_PIDS:
        chosen = [f for f in facts if f.pid == pid and f.in_pool and f.group == "null"]
        judged = [f for f in cohorts if f.pid == pid and f.in_pool and f.group in groups]
        yield pid, chosen, judged, cache.get([p for f in chosen + judged for p in vp.sentences(f)])


def writers(args: argparse.Namespace) -> dict:
    """Leave one writer out: the roster's people of each writer against a null of the other three writers' people
    (in-pool facts, the default variant), and the hand-made cohorts against all 775."""
    from core.names.fictitious import roster

    writer = {r.name: r.writer for r in roster()}
    out: dict = {}
    for pid, chosen, judged, nll in _roster_facts(args, ("known", "unknown")):
        by: dict[int, list[FactStat]] = {}
        for f in chosen:
            by.setdefault(writer[f.person], []).append(vp.fact_outcome(f, nll, DEFAULT))
        out[pid] = {
            "mean_statistic": {
                f"writer {w}": round(statistics.mean(s.statistic for s in v), 2) for w, v in sorted(by.items())
            }
        }
        for w in sorted(by):
            null = EmpiricalNull([s for other, v in by.items() if other != w for s in v])
            ps = [null.p_value(s) for s in by[w]]
            out[pid][f"writer {w}"] = [*flagged(ps), len(null)]
        whole = EmpiricalNull([s for v in by.values() for s in v])
        for group in ("unknown", "known"):
            ps = [whole.p_value(vp.fact_outcome(f, nll, DEFAULT)) for f in judged if f.group == group]
            out[pid][f"{group} vs all {len(whole)}"] = flagged(ps)
        print(pid, out[pid])
    counts = "writer w: [p <= 0.01, p <= 0.05, facts, null facts of the other writers]; in-pool facts"
    store(args, "roster_writers", counts, out)
    return out


def subsets(args: argparse.Namespace) -> dict:
    """How much the null's draw matters: the invented cohorts (in-pool facts, the default variant) judged against
    ``--subsets`` random nulls of 200 of the roster's 775 people (seeded), beside the service's default null (the
    roster's first 200 in its seeded order). Per property: the invented people flagged at p <= 0.01 (5 %, 50 %, 95 %
    of the draws), the null's own leave-one-out count, and the share of draws for which the invented cohort's 95 %
    interval holds the null's leave-one-out rate (the benchmark's "fictitious in the null's interval")."""
    from core.measures.null import Rate

    rng = random.Random(args.seed)
    out: dict = {}
    for pid, chosen, judged, nll in _roster_facts(args, ("unknown",)):
        null_stats = [vp.fact_outcome(f, nll, DEFAULT) for f in chosen]
        judged_stats = [vp.fact_outcome(f, nll, DEFAULT) for f in judged]

        def judge(
            people: Sequence[int], null_stats: list[FactStat] = null_stats, judged_stats: list[FactStat] = judged_stats
        ) -> tuple[int, int, bool]:
            null = EmpiricalNull([null_stats[i] for i in people])
            k = sum(null.p_value(s) <= 0.01 for s in judged_stats)
            loo = sum(p <= 0.01 for p in null.leave_one_out_p_values())
            interval = Rate.of(k, len(judged_stats))
            return k, loo, interval.low <= loo / len(people) <= interval.high

        draws = [judge(rng.sample(range(len(null_stats)), 200)) for _ in range(args.subsets)]
        ks, loos = sorted(d[0] for d in draws), sorted(d[1] for d in draws)
        quantiles = lambda v: [v[int(q * (len(v) - 1))] for q in (0.05, 0.5, 0.95)]  # noqa: E731
        k, loo, covers = judge(range(200))
        out[pid] = {
            "default_null": {"flagged": k, "null_loo": loo, "covers": covers},
            "flagged_q05_q50_q95": quantiles(ks),
            "null_loo_q05_q50_q95": quantiles(loos),
            "covers_share": round(sum(d[2] for d in draws) / len(draws), 3),
            "judged": len(judged_stats),
            "roster": len(null_stats),
        }
        print(pid, out[pid])
    counts = f"{args.subsets} random nulls of 200 roster people; invented people flagged at p <= 0.01; in-pool facts"
    store(args, "null_subsets", counts, out)
    return out


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--cache", default=str(vp.REPO / "var" / "verdict_power_nll.sqlite3"))
    ap.add_argument("--out", type=Path, default=None, help="also store the result under 'hand_null' in this JSON file")
    ap.add_argument(
        "--writers",
        action="store_true",
        help="instead: each roster writer's people judged against the other three writers' (all 775 null people;"
        " citizenship, birthplace, languages), stored under 'roster_writers'",
    )
    ap.add_argument(
        "--subsets",
        type=int,
        default=0,
        help="instead: the invented cohorts judged against this many random nulls of 200 of the roster's 775 people"
        " (citizenship, birthplace, languages), stored under 'null_subsets'",
    )
    ap.add_argument("--seed", type=int, default=1, help="of --subsets' draws")
    args = ap.parse_args(argv)
    if args.writers:
        return writers(args)
    if args.subsets:
        return subsets(args)
    covered = origin_covered()
    vp.SCHEMES = ("same_origin",)
    facts = vp.build_facts(args.model, 200, 0, KNOWN, None, UNKNOWN)
    cache = vp.NllCache(Path(args.cache), args.model)
    out: dict = {}
    for pid in vp.PIDS:
        chosen = [f for f in facts if f.pid == pid and f.in_pool and f.group != "null_out"]
        nll = cache.get([p for f in chosen for p in vp.sentences(f)])
        by: dict[str, list[FactStat]] = {}
        for f in chosen:
            stat = vp.fact_outcome(f, nll, DEFAULT)
            by.setdefault(f.cohort or "null", []).append(stat)
            if f.cohort in UNKNOWN:  # the invented people whose origin the null's roster has, and the others
                by.setdefault("unknown_covered" if covered(f.person) else "unknown_other_origins", []).append(stat)
        means = {k: round(statistics.mean(s.statistic for s in v), 2) for k, v in by.items()}
        print(f"{pid} mean truth z: {means}")
        out[pid] = {"mean_statistic": means, "nulls": {}}
        for null_key, judged in NULLS.items():
            null = EmpiricalNull(by[null_key])
            row = {"null_loo_p01": sum(p <= 0.01 for p in null.leave_one_out_p_values()), "null_size": len(null)}
            for key in judged + (("unknown_covered", "unknown_other_origins") if null_key == "null" else ()):
                ps = [null.p_value(s) for s in by.get(key, [])]
                row[key] = flagged(ps)
            out[pid]["nulls"][null_key] = row
            print(f"  null = {null_key}: {row}")
    store(args, "hand_null", "[p <= 0.01, p <= 0.05, facts] per judged cohort; in-pool facts only", out)
    return out


if __name__ == "__main__":
    main()
