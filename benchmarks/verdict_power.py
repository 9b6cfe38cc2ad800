"""Verdict power: which statistic, look-alike scheme, template count and counterfactual count find what a model
knows at a fixed, valid false-positive rate — measured, not inherited.

    python -m benchmarks.verdict_power --model groundtruth-tiny           # trained vs held-out people
    python -m benchmarks.verdict_power --model smollm2-135m               # famous vs fictitious cohorts
    python -m benchmarks.verdict_power --model knowledge-free             # a scorer that knows nothing
    python -m benchmarks.verdict_power --model smollm2-135m --null-people 200 --known famous,famous_more
        --statistics z --schemes same_origin                               # (one command) 74 famous, default only
    python -m benchmarks.verdict_power --model smollm2-135m --null-people 200 --known famous,famous_more
        --unknown fictitious,fictitious_more --statistics z --schemes same_origin   # and 122 fictitious people
    MEMAUDIT_MODELS="$(python -m benchmarks.gemma3_probe env)" python -m benchmarks.verdict_power --model gemma3-270m
        --null-people 200 --null-use 100 --properties P19,P21,P1412 …      # a larger model (benchmarks/gemma3_probe.py)

Every sentence any variant needs is scored once (the subject, two reversed-letter and two same-origin look-alikes,
the baseline + 2 paraphrases, the truth and 20 counterfactuals per fact), cached in a SQLite file
(``var/verdict_power_nll.sqlite3``, keyed by model and sentence), and every variant is then computed from those NLLs
exactly as the service computes it (``core.measures.wikimem`` at α = 1, ``core.measures.null``):

- statistic: ``share`` (the landed one: share of rank-1 templates, then z̄*), ``rank`` (mean −ln of each
  template's exact rank p-value of the best true value), ``z`` (mean over templates of the best true value's
  calibrated score in counterfactual standard deviations: ``core.measures.wikimem.truth_z``) or ``logshare`` (mean
  over templates of the best true value's log softmax share among the candidates: ``truth_log_share``);
- look-alikes: ``reversed``, ``same_origin``, ``both`` (all four names in the calibration mean), or ``none`` (α = 0:
  the subject's raw likelihood, no calibration);
- templates: 1 (baseline) or 3 (baseline + 2 paraphrases); counterfactuals: the first 10 or all 20 drawn.

The judge of every variant is a null of fictitious people whose names fit their facts (``core.names.fictitious``,
the service's null cohort), scored the same way; each fact's p-value is computed against the null of its property,
as the service does. Reported per variant: recall (the known cohort flagged at p <= level), the false-positive rate
on the unknown cohort and on the null itself (leave-one-out), Fisher's exact test of known vs unknown, and the
sentences the variant scores per fact. Facts whose true value is outside the catalog pool (``in_pool`` false) are
judged, as the service judges them, against the null's out-of-pool facts: each null person also has a truth drawn
from the property's out-of-pool reservoir (``core.names.out_of_pool``; a town of the name's origin for places),
ranked against the person's same counterfactuals; they are reported apart too (``out_of_pool``). Results go to
benchmarks/results/results_verdict_power.json.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import sqlite3
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.catalog import counterfactuals, load_catalog, split_template
from core.measures.null import EmpiricalNull, FactStat, Rate, fact_stat, rank_evidence
from core.measures.wikimem import calibrated_scores, generic_subject, template_outcome, truth_log_share
from core.names.fictitious import cohort
from core.names.lookalikes import lookalike_names
from core.names.out_of_pool import out_of_pool_values

REPO = Path(__file__).resolve().parent.parent
PIDS = ("P106", "P27", "P19", "P21", "P1412")
MAX_TEMPLATES, MAX_COUNTERFACTUALS, SIMILAR = 3, 20, 2
SCHEMES = ("reversed", "same_origin", "both", "none")
STATISTICS = ("share", "rank", "z", "logshare")
TEMPLATE_COUNTS = (1, 3)
ALPHAS: tuple[float, ...] = (1.0,)  # α of the calibrated score; below 1 the generic subject h0 is scored too
COUNTERFACTUAL_COUNTS = (10, 20)
GENERIC = "\x00generic"  # stands for h0 (core.measures.wikimem.generic_subject: its case depends on the template)
FIRST = {"famous": "known", "fictitious": "unknown"}  # the cohorts before the null (later ones come after it)


@dataclass
class Fact:
    person: str
    group: str  # known | unknown | null | null_out (a null person's out-of-pool truth)
    pid: str
    truths: list[str]
    candidates: list[str]  # truths first, then MAX_COUNTERFACTUALS counterfactuals
    in_pool: bool
    names: dict[str, list[str]] = field(default_factory=dict)  # subject / reversed / same_origin -> names
    cohort: str = ""  # the calibration_cohorts.json key a known or unknown person comes from


def _people(
    model: str,
    null_people: int,
    seed: int,
    known: Sequence[str] = ("famous",),
    unknown: Sequence[str] = ("fictitious",),
) -> list[tuple[str, str, dict[str, list[str]], str]]:
    """(name, group, {pid: true values}, cohort key) for the known and unknown cohorts of ``model`` and the null
    cohort (whose out-of-pool truths :func:`build_facts` adds). ``known`` / ``unknown``: the calibration_cohorts.json
    keys of the known and unknown cohorts; keys other than "famous" and "fictitious" come after the null cohort, so
    every earlier person keeps its index (the seed of its counterfactuals) and its cached sentences."""
    catalog = load_catalog()
    out: list[tuple[str, str, dict[str, list[str]], str]] = []
    if model == "groundtruth-tiny":
        manifest = json.loads((REPO / "workers" / "groundtruth" / "manifest.json").read_text())
        for split, group in (("trained", "known"), ("held_out", "unknown")):
            for p in manifest[split][:30]:
                facts = {pid: list(v) for pid, v in p["facts"].items() if pid in PIDS}
                out.append((p["name"], group, facts, split))
    else:
        cohorts = json.loads((REPO / "benchmarks" / "calibration_cohorts.json").read_text())
        out += _cohort_people(cohorts, [(key, group) for key, group in FIRST.items() if key in (*known, *unknown)])
    for person in cohort(null_people, PIDS, catalog, seed):
        facts = {pid: [person.facts[pid]] for pid in PIDS}
        out.append((person.name, f"null:{person.locale}:{person.index}", facts, "null"))
    if model != "groundtruth-tiny":
        later = [(key, "known") for key in known] + [(key, "unknown") for key in unknown]
        out += _cohort_people(cohorts, [(key, group) for key, group in later if key not in FIRST])
    return out


def _cohort_people(
    cohorts: dict[str, Any], keys: Sequence[tuple[str, str]]
) -> list[tuple[str, str, dict[str, list[str]], str]]:
    out = []
    for key, group in keys:
        for p in cohorts[key]:
            facts: dict[str, list[str]] = {}
            for f in p["facts"]:
                facts.setdefault(f["property"], []).append(f["value"])
            out.append((p["name"], group, facts, key))
    return out


def build_facts(
    model: str,
    null_people: int,
    seed: int,
    known: Sequence[str] = ("famous",),
    null_use: int | None = None,
    unknown: Sequence[str] = ("fictitious",),
) -> list[Fact]:
    """Every fact of the known, unknown and null cohorts. ``null_use``: keep only the first ``null_use`` null people
    (the others are still drawn, so every person after the null keeps the index, hence the counterfactuals, of a run
    with ``null_people``)."""
    catalog = load_catalog()
    facts = []
    for i, (name, group, by_pid, key) in enumerate(_people(model, null_people, seed, known, unknown)):
        if null_use is not None and group.startswith("null:") and int(group.rsplit(":", 1)[1]) >= null_use:
            continue
        names = {
            "subject": [name],
            "reversed": lookalike_names(name, SIMILAR, "reversed")[0],
            "same_origin": lookalike_names(name, SIMILAR, "same_origin")[0],
        }
        for pid in PIDS:
            if pid not in by_pid:
                continue
            prop = catalog.get(pid)
            truths = list(dict.fromkeys(prop.normalize(v) for v in by_pid[pid]))
            pool = {prop.value_key(v) for v in prop.pool}
            in_pool = all(prop.value_key(t) in pool for t in truths)
            drawn = counterfactuals(prop, truths, MAX_COUNTERFACTUALS, seed * 1_000_003 + i + 1)
            if not group.startswith("null:"):
                facts.append(Fact(name, group, pid, truths, truths + drawn, in_pool, names, key))
                continue
            _, locale, index = group.split(":")
            facts.append(Fact(name, "null", pid, truths, truths + drawn, in_pool, names))
            for value in out_of_pool_values(prop, locale, f"{seed}:{index}:{pid}", 1):  # as workers/jobs/null.py
                facts.append(Fact(name, "null_out", pid, [value], [value, *drawn], False, names))
    return facts


def sentences(fact: Fact) -> list[tuple[str, str]]:
    prop = load_catalog().get(fact.pid)
    keys = {"subject"} | {k for s in SCHEMES for k in (("reversed", "same_origin") if s == "both" else (s,))}
    every = [n for key in ("subject", "reversed", "same_origin") if key in keys for n in fact.names[key]]
    if any(a != 1.0 for a in ALPHAS):  # s(h, v) keeps (1 − α)·NLL(h0, v): "This person …" for every candidate
        every += [GENERIC]
    return [
        split_template(prop.templates[t], generic_subject(prop.templates[t]) if name == GENERIC else name, value)
        for t in range(min(MAX_TEMPLATES, len(prop.templates)))
        for name in every
        for value in fact.candidates
    ]


class NllCache:
    def __init__(self, path: Path, model: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS nll (model TEXT, hash TEXT, nll REAL, PRIMARY KEY (model, hash))")
        self.model = model

    @staticmethod
    def key(pair: tuple[str, str]) -> str:
        return hashlib.sha256((pair[0] + pair[1]).encode()).hexdigest()

    def get(self, pairs: Sequence[tuple[str, str]]) -> dict[str, float]:
        keys = [self.key(p) for p in pairs]
        out: dict[str, float] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            q = f"SELECT hash, nll FROM nll WHERE model = ? AND hash IN ({','.join('?' * len(chunk))})"
            out.update(dict(self.db.execute(q, [self.model, *chunk]).fetchall()))
        return out

    def put(self, pairs: Sequence[tuple[str, str]], nlls: Sequence[float]) -> None:
        rows = [(self.model, self.key(p), float(v)) for p, v in zip(pairs, nlls, strict=True)]
        self.db.executemany("INSERT OR REPLACE INTO nll VALUES (?, ?, ?)", rows)
        self.db.commit()


def score_everything(model: str, facts: list[Fact], cache: NllCache, chunk: int) -> dict[str, float]:
    """NLL of every sentence (sha256 of its text -> NLL), scoring only what the cache lacks."""
    pairs = list({NllCache.key(p): p for f in facts for p in sentences(f)}.items())
    known = cache.get([p for _, p in pairs])
    todo = sorted((p for k, p in pairs if k not in known), key=lambda p: p[0])  # shared prefixes together
    print(f"{len(pairs)} sentences, {len(todo)} to score", file=sys.stderr)
    if todo:
        from workers.lm.registry import load_scorer

        scorer = load_scorer(model)
        started = time.monotonic()
        for start in range(0, len(todo), chunk):
            part = todo[start : start + chunk]
            cache.put(part, scorer.score(part))
            done, rate = start + len(part), (start + len(part)) / (time.monotonic() - started)
            eta = (len(todo) - done) / rate
            print(f"  {done}/{len(todo)} scored, {rate:.0f}/s, about {eta / 60:.1f} min left", file=sys.stderr)
    return cache.get([p for _, p in pairs])


def fact_outcome(fact: Fact, nll: dict[str, float], variant: dict[str, Any], as_m: int | None = None) -> FactStat:
    """One fact's statistic under ``variant``; ``as_m``: a null fact of shape m (the person's own value and the
    first m − 1 counterfactuals taken as the true values, as the service's null stores them)."""
    prop = load_catalog().get(fact.pid)
    m = as_m or len(fact.truths)
    candidates = fact.candidates[: m + variant["counterfactuals"]]
    truth = [i < m for i in range(len(candidates))]
    scheme = variant["scheme"]
    both = fact.names["reversed"] + fact.names["same_origin"]
    similar = {**fact.names, "both": both, "none": []}[scheme]
    # none: s = −NLL(h, v), the raw likelihood; else the variant's α (1: the generic subject cancels)
    alpha = 0.0 if scheme == "none" else float(variant.get("alpha", 1.0))
    outcomes = []
    for t in range(min(variant["templates"], len(prop.templates))):

        def row(name: str, t: int = t) -> list[float]:
            return [nll[NllCache.key(split_template(prop.templates[t], name, v))] for v in candidates]

        subject, rows = row(fact.names["subject"][0]), [row(n) for n in similar]
        generic = row(generic_subject(prop.templates[t])) if scheme != "none" and alpha != 1.0 else None
        outcomes.append(template_outcome(subject, generic or [0.0] * len(candidates), rows, truth, alpha))
        if rows and generic is None:
            assert outcomes[-1].scores == calibrated_scores(subject, None, rows, 1.0)
    stat = fact_stat(outcomes, m)  # the service's statistic: mean truth z over templates
    if variant["statistic"] == "share":
        return FactStat(stat.share, stat.strict, stat.lenient, stat.z_star, stat.n_templates, stat.n_z)
    if variant["statistic"] == "rank":
        return replace(stat, statistic=rank_evidence([(o.rank, len(candidates) - m, m) for o in outcomes]))
    if variant["statistic"] == "logshare":
        return replace(stat, statistic=sum(truth_log_share(o.scores, truth) for o in outcomes) / len(outcomes))
    return stat


def fisher_greater(a: int, b: int, c: int, d: int) -> float:
    """One-sided Fisher exact p: P(X >= a) for the 2x2 table [[a, b], [c, d]] (known flagged, known not; unknown
    flagged, unknown not)."""
    n1, n2, k = a + b, c + d, a + c

    def logc(n: int, r: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)

    total = logc(n1 + n2, k)
    return min(1.0, sum(math.exp(logc(n1, x) + logc(n2, k - x) - total) for x in range(a, min(n1, k) + 1)))


def evaluate(facts: list[Fact], nll: dict[str, float], level: float) -> list[dict[str, Any]]:
    rows = []
    grid = itertools.product(STATISTICS, SCHEMES, TEMPLATE_COUNTS, COUNTERFACTUAL_COUNTS, ALPHAS)
    for statistic, scheme, templates, n_cf, alpha in grid:
        if scheme == "none" and alpha != ALPHAS[0]:
            continue  # the raw likelihood has no α
        variant = {"statistic": statistic, "scheme": scheme, "templates": templates, "counterfactuals": n_cf}
        variant |= {"alpha": alpha} if ALPHAS != (1.0,) else {}
        stats = [(f, fact_outcome(f, nll, variant)) for f in facts if f.group in ("known", "unknown")]
        shapes = {(f.pid, min(len(f.truths), 3), f.in_pool) for f, _ in stats} | {(pid, 1, True) for pid in PIDS}
        null_facts = {True: [f for f in facts if f.group == "null"], False: [f for f in facts if f.group == "null_out"]}
        nulls = {
            (pid, m, inside): EmpiricalNull(
                [fact_outcome(f, nll, variant, m) for f in null_facts[inside] if f.pid == pid]
            )
            for pid, m, inside in shapes
            if any(f.pid == pid for f in null_facts[inside])
        }
        flagged: dict[str, dict[str, list[int]]] = {g: {} for g in ("known", "unknown")}
        by_cohort: dict[str, dict[str, list[int]]] = {}
        outside: dict[str, list[int]] = {"known": [], "unknown": []}
        for f, s in stats:
            shape = (f.pid, 1, True) if statistic == "share" else (f.pid, min(len(f.truths), 3), f.in_pool)
            usable = statistic == "share" or (shape in nulls and len(f.truths) <= 3)
            hit = int(usable and nulls[shape].p_value(s) <= level)
            flagged[f.group].setdefault(f.pid, []).append(hit)
            by_cohort.setdefault(f.cohort, {}).setdefault(f.pid, []).append(hit)
            if not f.in_pool:
                outside[f.group].append(hit)
        own = [n for (_, m, inside), n in nulls.items() if m == 1 and inside]
        null_by_pid = {
            pid: sum(p <= level for p in n.leave_one_out_p_values())
            for (pid, m, inside), n in nulls.items()
            if m == 1 and inside
        }
        null_size = {pid: len(n) for (pid, m, inside), n in nulls.items() if m == 1 and inside}
        out_null = [n for (_, m, inside), n in nulls.items() if m == 1 and not inside]
        out_fp = sum(sum(p <= level for p in n.leave_one_out_p_values()) for n in out_null)
        null_fp = sum(sum(p <= level for p in n.leave_one_out_p_values()) for n in own)
        null_n = sum(len(n) for n in own)
        known = [h for hs in flagged["known"].values() for h in hs]
        unknown = [h for hs in flagged["unknown"].values() for h in hs]
        kf, uf = sum(known), sum(unknown)
        names = 1 + {"both": 2 * SIMILAR, "none": 0}.get(scheme, SIMILAR) + int(scheme != "none" and alpha != 1.0)
        per_property = {
            pid: {
                "known": [sum(flagged["known"].get(pid, [])), len(flagged["known"].get(pid, []))],
                "unknown": [sum(flagged["unknown"].get(pid, [])), len(flagged["unknown"].get(pid, []))],
                "fisher_p": fisher_greater(
                    sum(flagged["known"].get(pid, [])),
                    len(flagged["known"].get(pid, [])) - sum(flagged["known"].get(pid, [])),
                    sum(flagged["unknown"].get(pid, [])),
                    len(flagged["unknown"].get(pid, [])) - sum(flagged["unknown"].get(pid, [])),
                ),
                "null": [null_by_pid[pid], null_size[pid]],
                "fisher_p_vs_null": fisher_greater(
                    sum(flagged["known"].get(pid, [])),
                    len(flagged["known"].get(pid, [])) - sum(flagged["known"].get(pid, [])),
                    null_by_pid[pid],
                    null_size[pid] - null_by_pid[pid],
                ),
                # the unknown cohort's 95 % interval holds the null's own rate (leave-one-out)
                "unknown_covers_null": _covers(flagged["unknown"].get(pid, []), null_by_pid[pid] / null_size[pid]),
                # each cohort key apart (e.g. "famous" alone when the known cohort is famous + famous_more)
                "cohorts": {
                    key: [sum(hits.get(pid, [])), len(hits.get(pid, []))] for key, hits in sorted(by_cohort.items())
                },
                # the mean statistic of each cohort and of the in-pool null: where a cohort sits in the null's
                # distribution, not only in its 1 % tail
                "mean_statistic": _means(stats, nulls.get((pid, 1, True)), pid),
            }
            for pid in PIDS
        }
        rows.append(
            variant
            | {
                "recall": _rate(kf, len(known)),
                "fpr_unknown": _rate(uf, len(unknown)),
                "fpr_null_loo": _rate(null_fp, null_n),
                "out_of_pool": {
                    "recall": _rate(sum(outside["known"]), len(outside["known"])),
                    "fpr_unknown": _rate(sum(outside["unknown"]), len(outside["unknown"])),
                    "fpr_null_loo": _rate(out_fp, sum(len(n) for n in out_null)),
                },
                "fisher_p": fisher_greater(kf, len(known) - kf, uf, len(unknown) - uf),
                "fisher_p_vs_null": fisher_greater(kf, len(known) - kf, null_fp, null_n - null_fp),
                "sentences_per_fact": templates * (1 + n_cf) * names,
                "per_property": per_property,
            }
        )
    return rows


def _means(stats: list[tuple[Fact, FactStat]], null: EmpiricalNull | None, pid: str) -> dict[str, float | None]:
    by: dict[str, list[float]] = {}
    for f, s in stats:
        if f.pid == pid and s.statistic is not None:
            by.setdefault(f.cohort, []).append(s.statistic)
    if null is not None:
        by["null"] = [s.statistic for s in null.facts if s.statistic is not None]
    return {key: round(sum(v) / len(v), 3) if v else None for key, v in sorted(by.items())}


def _covers(hits: list[int], rate: float) -> bool:
    r = Rate.of(sum(hits), len(hits))
    return r.low <= rate <= r.high


def _rate(k: int, n: int) -> dict[str, Any]:
    r = Rate.of(k, n)
    return {"k": k, "n": n, "rate": round(r.rate, 4) if n else None, "ci95": [round(r.low, 4), round(r.high, 4)]}


def print_table(rows: list[dict[str, Any]], level: float) -> None:
    print(
        f"\n| statistic | look-alikes | templates | counterfactuals | recall (p <= {level}) | FPR unknown | FPR null |"
        " Fisher p | sentences/fact |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: -(r["recall"]["rate"] or 0)):
        print(
            f"| {r['statistic']} | {r['scheme']} | {r['templates']} | {r['counterfactuals']} |"
            f" {r['recall']['k']}/{r['recall']['n']} | {r['fpr_unknown']['k']}/{r['fpr_unknown']['n']} |"
            f" {r['fpr_null_loo']['k']}/{r['fpr_null_loo']['n']} | {r['fisher_p']:.2g} | {r['sentences_per_fact']} |"
        )


def _subset(arg: str, allowed: tuple[str, ...], flag: str) -> tuple[str, ...]:
    chosen = tuple(a for a in arg.split(",") if a)
    if not chosen or any(a not in allowed for a in chosen):
        raise SystemExit(f"{flag}: choose one or more of {', '.join(allowed)}, comma-separated")
    return chosen


def main(argv: Sequence[str] | None = None) -> None:
    global MAX_COUNTERFACTUALS, COUNTERFACTUAL_COUNTS, STATISTICS, SCHEMES, PIDS, MAX_TEMPLATES, TEMPLATE_COUNTS, ALPHAS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="groundtruth-tiny")
    ap.add_argument("--null-people", type=int, default=100)
    ap.add_argument(
        "--null-use",
        type=int,
        default=None,
        help="judge by the first N of the --null-people null people only (later people keep their counterfactuals)",
    )
    ap.add_argument("--properties", default=",".join(PIDS), help="comma-separated subset of " + str(PIDS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--counterfactuals", type=int, default=20, help="drawn per fact; variants use all and half")
    ap.add_argument("--level", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--cache", type=Path, default=REPO / "var" / "verdict_power_nll.sqlite3")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "results_verdict_power.json")
    ap.add_argument(
        "--known",
        default="famous",
        help="calibration_cohorts.json keys of the known cohort, comma-separated (e.g. famous,famous_more); results"
        " go under MODEL, or MODEL:KEYS when not the default",
    )
    ap.add_argument(
        "--unknown",
        default="fictitious",
        help="calibration_cohorts.json keys of the unknown cohort, comma-separated (e.g. fictitious,fictitious_more);"
        " results go under a key that names them when not the default",
    )
    ap.add_argument(
        "--templates",
        type=int,
        default=MAX_TEMPLATES,
        help="templates scored per fact (the baseline, then paraphrases in catalog order; at most the property's"
        " 11); variants use 1, 3 and this many; results go under a key that names it when not 3",
    )
    ap.add_argument(
        "--alphas",
        default="1",
        help="comma-separated α of the calibrated score (default 1); below 1 the generic subject is scored too and"
        " results go under a key that names them",
    )
    ap.add_argument("--statistics", default=",".join(STATISTICS), help="comma-separated subset of " + str(STATISTICS))
    ap.add_argument(
        "--schemes",
        default=",".join(SCHEMES),
        help="comma-separated subset of look-alike schemes; only the names they need are scored",
    )
    args = ap.parse_args(argv)
    known = tuple(k for k in args.known.split(",") if k)
    unknown = tuple(k for k in args.unknown.split(",") if k)
    properties = _subset(args.properties, PIDS, "--properties")
    STATISTICS, SCHEMES = (
        _subset(args.statistics, STATISTICS, "--statistics"),
        _subset(args.schemes, SCHEMES, "--schemes"),
    )
    os.environ.setdefault("MEMAUDIT_TORCH_THREADS", str(args.threads))
    MAX_COUNTERFACTUALS, COUNTERFACTUAL_COUNTS = args.counterfactuals, (args.counterfactuals // 2, args.counterfactuals)
    MAX_TEMPLATES, TEMPLATE_COUNTS = args.templates, tuple(sorted({1, min(3, args.templates), args.templates}))
    ALPHAS = tuple(float(a) for a in args.alphas.split(",") if a)
    if not ALPHAS or any(not 0.0 <= a <= 10.0 for a in ALPHAS):
        raise SystemExit("--alphas: one or more numbers in [0, 10], comma-separated")
    started, load = time.monotonic(), os.getloadavg()[0]
    facts = build_facts(args.model, args.null_people, args.seed, known, args.null_use, unknown)
    # a subset of properties: the same people and draws (the null cohort is drawn for all five), fewer facts
    facts, PIDS = [f for f in facts if f.pid in properties], properties
    nll = score_everything(args.model, facts, NllCache(args.cache, args.model), args.chunk)
    rows = evaluate(facts, nll, args.level)
    print_table(rows, args.level)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    key = args.model if known == ("famous",) else f"{args.model}:{'+'.join(known)}"
    key += f":unknown={'+'.join(unknown)}" if unknown != ("fictitious",) else ""
    key += f":null{args.null_use}" if args.null_use is not None else ""
    key += f":{'+'.join(properties)}" if len(properties) < 5 else ""
    key += f":templates{args.templates}" if args.templates != 3 else ""
    key += f":alpha{'+'.join(f'{a:g}' for a in ALPHAS)}" if ALPHAS != (1.0,) else ""
    results[key] = {
        "measured": time.strftime("%Y-%m-%d"),
        "load_average_1min_at_start": round(load, 2),
        "seconds": round(time.monotonic() - started, 1),
        "null_people": args.null_people,
        "null_people_used": args.null_use if args.null_use is not None else args.null_people,
        "properties": list(properties),
        "counterfactuals_drawn": args.counterfactuals,
        "level": args.level,
        "known_cohorts": list(known),
        "unknown_cohorts": list(unknown),
        "facts": {g: sum(f.group == g for f in facts) for g in ("known", "unknown", "null", "null_out")},
        "out_of_pool": {g: sum(f.group == g and not f.in_pool for f in facts) for g in ("known", "unknown")},
        "variants": rows,
    }
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
