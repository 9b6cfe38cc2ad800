"""Cohort statistics as WikiMem reports them, and what a null cohort gives for the same properties.

For a cohort of subjects, each with facts (subject–property results):

* M̄ — the mean memorization rate: the mean over facts of the share of rank-1 templates;
* M̄ strict / M̄ lenient — the share of facts memorized under every template / under some template;
* z̄* — the mean z* over every rank-1 template of every fact (z* is defined only at rank 1);
* H_{M=0} — the share of *subjects* with no memorized property (no template ranks any true value first).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.measures.null import FactStat


@dataclass(frozen=True)
class CohortStats:
    subjects: int
    facts: int
    mean_memorization: float  # M̄
    strict: float
    lenient: float
    z_star: float | None  # z̄* over rank-1 templates
    zero_memorization: float  # H_{M=0}


def _pooled_z(facts: Sequence[FactStat]) -> float | None:
    n = sum(f.n_z for f in facts)
    return sum(f.z_star * f.n_z for f in facts if f.z_star is not None) / n if n else None


def cohort_stats(subjects: Sequence[Sequence[FactStat]]) -> CohortStats:
    """WikiMem's cohort numbers; a subject without facts counts as a subject with nothing memorized."""
    facts = [f for s in subjects for f in s]
    n = len(facts)
    return CohortStats(
        subjects=len(subjects),
        facts=n,
        mean_memorization=sum(f.share for f in facts) / n if n else math.nan,
        strict=sum(f.strict for f in facts) / n if n else math.nan,
        lenient=sum(f.lenient for f in facts) / n if n else math.nan,
        z_star=_pooled_z(facts),
        zero_memorization=sum(not any(f.lenient for f in s) for s in subjects) / len(subjects)
        if subjects
        else math.nan,
    )


def null_cohort_stats(
    cohort_properties: Sequence[Sequence[str]],
    null_facts: Mapping[str, Sequence[FactStat]],
    null_people: Sequence[Mapping[str, FactStat]],
) -> CohortStats:
    """What a cohort of people the model cannot know would show, for the same properties as the real cohort.

    ``cohort_properties``: each real subject's properties. ``null_facts``: per property, its null facts.
    ``null_people``: per null person, their own (not pseudo-truth) fact per property.
    M̄, strict and lenient average each property's null rate over the cohort's facts (a property weighs as often
    as the cohort has it); z̄* pools the rank-1 templates the same way. H_{M=0} averages, over the cohort's
    subjects, the share of null people — among those with every one of that subject's properties — with none of
    them memorized; where no null person has them all, it assumes independence: Π_p (1 − lenient rate of p)."""
    facts, h_values = [], []
    for props in cohort_properties:
        for pid in props:
            facts.extend((pid, f) for f in null_facts[pid])
        h_values.append(_null_h(props, null_facts, null_people))
    weights = {pid: 1 / len(null_facts[pid]) for props in cohort_properties for pid in props}
    total = sum(weights[pid] for pid, _ in facts)
    mean = lambda value: sum(weights[p] * value(f) for p, f in facts) / total if total else math.nan  # noqa: E731
    z_weight = sum(weights[p] * f.n_z for p, f in facts)
    z = sum(weights[p] * f.n_z * f.z_star for p, f in facts if f.z_star is not None) / z_weight if z_weight else None
    return CohortStats(
        subjects=len(cohort_properties),
        facts=sum(len(p) for p in cohort_properties),
        mean_memorization=mean(lambda f: f.share),
        strict=mean(lambda f: float(f.strict)),
        lenient=mean(lambda f: float(f.lenient)),
        z_star=z,
        zero_memorization=sum(h_values) / len(h_values) if h_values else math.nan,
    )


def _null_h(
    props: Sequence[str], null_facts: Mapping[str, Sequence[FactStat]], null_people: Sequence[Mapping[str, FactStat]]
) -> float:
    wanted = set(props)
    complete = [p for p in null_people if wanted <= p.keys()]
    if complete:
        return sum(not any(p[pid].lenient for pid in wanted) for p in complete) / len(complete)
    h = 1.0
    for pid in wanted:
        facts = null_facts[pid]
        h *= 1 - sum(f.lenient for f in facts) / len(facts)
    return h
