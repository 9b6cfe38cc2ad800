"""A null of hand-written people: judge each hand-made fictitious cohort (and the famous) against another cohort of
invented people with ordinary names, written by another hand, instead of against the generated null — the check
behind docs/measures.md, "Typical names" (what a null as typical as real names would find).

    python -m benchmarks.verdict_power --model smollm2-135m --null-people 200 --known famous,famous_more \\
        --unknown fictitious,fictitious_more,fictitious_other --statistics z --schemes same_origin   # scores, caches
    python -m benchmarks.hand_null                                                                 # then this

Reads the NLLs that verdict_power cached (``var/verdict_power_nll.sqlite3``; scores nothing) and computes the
default variant (truth z, same-origin look-alikes, baseline + 2 paraphrases, 20 counterfactuals) exactly as
verdict_power does; in-pool facts only. Prints, per property, each cohort's mean statistic and, for each choice of
null (a hand-written cohort, or the generated null), how many facts of the judged cohorts reach p <= 0.01 [<= 0.05]
and the null's own leave-one-out count.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path

from benchmarks import verdict_power as vp
from core.measures.null import EmpiricalNull, FactStat

DEFAULT = {"statistic": "z", "scheme": "same_origin", "templates": 3, "counterfactuals": 20}
KNOWN, UNKNOWN = ("famous", "famous_more"), ("fictitious", "fictitious_more", "fictitious_other")
NULLS = {  # the null -> the cohorts judged against it
    "fictitious_other": ("fictitious", "fictitious_more", "famous", "famous_more"),
    "fictitious_more": ("fictitious_other", "fictitious", "famous", "famous_more"),
    # the service's null: since generator hand-written-1, people of the hand-written roster (core/names/null_roster.json,
    # four other writers); before, random combinations of Faker's name lists
    "null": ("fictitious", "fictitious_more", "fictitious_other", "famous", "famous_more"),
}


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--cache", default=str(vp.REPO / "var" / "verdict_power_nll.sqlite3"))
    args = ap.parse_args(argv)
    vp.SCHEMES = ("same_origin",)
    facts = vp.build_facts(args.model, 200, 0, KNOWN, None, UNKNOWN)
    cache = vp.NllCache(Path(args.cache), args.model)
    out: dict = {}
    for pid in vp.PIDS:
        chosen = [f for f in facts if f.pid == pid and f.in_pool and f.group != "null_out"]
        nll = cache.get([p for f in chosen for p in vp.sentences(f)])
        by: dict[str, list[FactStat]] = {}
        for f in chosen:
            by.setdefault(f.cohort or "null", []).append(vp.fact_outcome(f, nll, DEFAULT))
        means = {k: round(statistics.mean(s.statistic for s in v), 2) for k, v in by.items()}
        print(f"{pid} mean truth z: {means}")
        out[pid] = {"mean_statistic": means, "nulls": {}}
        for null_key, judged in NULLS.items():
            null = EmpiricalNull(by[null_key])
            row = {"null_loo_p01": sum(p <= 0.01 for p in null.leave_one_out_p_values()), "null_size": len(null)}
            for key in judged:
                ps = [null.p_value(s) for s in by[key]]
                row[key] = [sum(p <= 0.01 for p in ps), sum(p <= 0.05 for p in ps), len(ps)]
            out[pid]["nulls"][null_key] = row
            print(f"  null = {null_key}: {row}")
    return out


if __name__ == "__main__":
    main()
