"""Null calibration math, every expected number worked out by hand."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from core.measures.cohort import cohort_stats, null_cohort_stats
from core.measures.misattribution import misattribution
from core.measures.null import (
    EmpiricalNull,
    FactStat,
    Rate,
    benjamini_hochberg,
    bh_adjusted,
    clopper_pearson,
    fact_stat,
    pseudo_truth_stats,
)
from core.measures.wikimem import template_outcome


def stat(share: float, z: float | None = None, n_z: int | None = None, strict: bool = False) -> FactStat:
    return FactStat(share, strict, share > 0, z, 3, n_z if n_z is not None else int(z is not None))


# Five null facts over 3 templates: (share, z̄*) = (0, –), (0, –), (1/3, 1.0), (1/3, 2.0), (2/3, 0.5).
NULL = EmpiricalNull([stat(0), stat(0), stat(1 / 3, 1.0), stat(1 / 3, 2.0), stat(2 / 3, 0.5)])


def test_empirical_p_value_counts_null_facts_at_least_as_extreme_plus_one():
    # (1/3, 1.5): at least as extreme are (1/3, 2.0) and (2/3, 0.5) -> (1 + 2) / (1 + 5)
    assert NULL.p_value(stat(1 / 3, 1.5)) == pytest.approx(3 / 6)
    # a tie counts as at least as extreme: (1/3, 1.0) -> (1/3,1.0), (1/3,2.0), (2/3,0.5) -> 4/6
    assert NULL.p_value(stat(1 / 3, 1.0)) == pytest.approx(4 / 6)
    # share 1 beats every null fact: the +1 keeps p at 1/6, never 0
    assert NULL.p_value(stat(1.0, None)) == pytest.approx(1 / 6)
    # share 0: every null fact is at least as extreme -> 1
    assert NULL.p_value(stat(0.0)) == 1.0
    # a share computed another way (2 of 6) equals 1/3
    assert NULL.p_value(stat(2 / 6, 1.0)) == pytest.approx(4 / 6)


def test_leave_one_out_p_values_and_the_fpr_of_a_p_value_policy():
    # each against the 4 others: (0): 4 others ≥ -> 5/5; (1/3,1): 2 -> 3/5; (1/3,2): 1 -> 2/5; (2/3): 0 -> 1/5
    assert NULL.leave_one_out_p_values() == pytest.approx([1.0, 1.0, 0.6, 0.4, 0.2])
    assert NULL.pvalue_rate(0.2).k == 1 and NULL.pvalue_rate(0.4).k == 2 and NULL.pvalue_rate(0.1).k == 0


def test_policy_rates_on_the_null():
    assert NULL.rate(lambda f: f.lenient) == Rate.of(3, 5)
    assert NULL.rate(lambda f: f.share >= 2 / 3).k == 1
    assert NULL.rate(lambda f: f.lenient).rate == pytest.approx(0.6)


def test_clopper_pearson_closed_forms():
    # k = 0: the upper bound solves (1 − p)^n = α/2 -> 1 − 0.025^(1/10) = 0.308497
    low, high = clopper_pearson(0, 10)
    assert (
        low == 0.0
        and high == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-9)
        and high == pytest.approx(0.308497, abs=1e-6)
    )
    # k = n: the lower bound solves p^n = α/2 -> 0.025^(1/10) = 0.691503
    assert clopper_pearson(10, 10) == pytest.approx((0.025**0.1, 1.0), abs=1e-9)
    # k = 1, n = 2: 1 − (1 − p)^2 = 0.025 -> p = 1 − √0.975; 1 − p^2 = 0.025 -> p = √0.975
    assert clopper_pearson(1, 2) == pytest.approx((1 - math.sqrt(0.975), math.sqrt(0.975)), abs=1e-9)
    assert clopper_pearson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        clopper_pearson(3, 2)


def test_benjamini_hochberg_step_up_by_hand():
    # m = 4, q = 0.05: bounds i·q/m = 0.0125, 0.025, 0.0375, 0.05
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.20], 0.05) == 0.01  # only the smallest passes
    assert benjamini_hochberg([0.01, 0.02, 0.03, 0.5], 0.05) == 0.03
    # step-up: the 2nd and 3rd fail their bounds, the 4th passes (0.049 ≤ 0.05), so all four are selected
    assert benjamini_hochberg([0.001, 0.04, 0.045, 0.049], 0.05) == 0.049
    assert benjamini_hochberg([0.5, 0.9], 0.05) == 0.0
    # adjusted: m·p_(i)/i = 0.04, 0.04, 0.04, 0.5, then the running minimum from the top
    assert bh_adjusted([0.01, 0.02, 0.03, 0.5]) == pytest.approx([0.04, 0.04, 0.04, 0.5])
    assert bh_adjusted([0.049, 0.001, 0.045, 0.04]) == pytest.approx([0.049, 0.004, 0.049, 0.049])


# The worked example of docs/measures.md: calibrated scores of physicist, chemist, painter, lawyer.
SCORES_A = [3.0, 0.5, 0.75, 0.0]
SCORES_B = [0.0, 1.5, 0.5, 0.0]


def test_pseudo_truths_match_the_audit_of_each_candidate_as_the_truth():
    stats = pseudo_truth_stats([SCORES_A, SCORES_B])
    # physicist: rank 1 under A (z* 1.72), rank 3 under B -> share 1/2, z̄* over rank-1 templates 1.72
    assert stats[0].share == 0.5 and stats[0].lenient and not stats[0].strict
    assert stats[0].z_star == pytest.approx(1.718, abs=1e-3) and stats[0].n_z == 1
    # chemist: rank 1 under B only; Δ_B = (−1.5, 1, −1, −1.5), mean −0.75, std √1.0625 -> z* = 1.75 / 1.0308
    assert stats[1].share == 0.5 and stats[1].z_star == pytest.approx(1.75 / math.sqrt(1.0625), abs=1e-9)
    assert stats[2].share == 0.0 and stats[2].z_star is None and stats[3].share == 0.0
    # each pseudo-truth equals the audit with that candidate as the only truth (any score table)
    rng = random.Random(3)
    rows = [[rng.gauss(0, 1) for _ in range(7)] for _ in range(5)]
    for i, pseudo in enumerate(pseudo_truth_stats(rows)):
        truth = [j == i for j in range(7)]
        outs = [template_outcome([-s for s in row], [0.0] * 7, [], truth, alpha=0.0) for row in rows]
        misattributed = misattribution([o.scores for o in outs], truth)  # as the subject job computes it
        assert pseudo == replace(fact_stat(outs, 1), misattribution=misattributed[0])


def test_cohort_stats_by_hand():
    f1 = FactStat(0.5, False, True, 1.72, 2, 1)
    f2 = FactStat(1.0, True, True, 2.5, 2, 2)
    f3 = FactStat(0.0, False, False, None, 2, 0)
    c = cohort_stats([[f1, f2], [f3]])
    assert (c.subjects, c.facts) == (2, 3)
    assert c.mean_memorization == pytest.approx(1.5 / 3) and c.strict == pytest.approx(1 / 3)
    assert c.lenient == pytest.approx(2 / 3)
    assert c.z_star == pytest.approx((1.72 * 1 + 2.5 * 2) / 3)  # pooled over the 3 rank-1 templates
    assert c.zero_memorization == 0.5  # the second subject has nothing memorized


def test_null_cohort_stats_weigh_properties_as_the_cohort_does():
    p1 = [FactStat(0.5, False, True, 2.0, 2, 1), FactStat(0.0, False, False, None, 2, 0)]
    p2 = [FactStat(0.0, False, False, None, 2, 0)] * 2 + [
        FactStat(0.5, False, True, 4.0, 2, 1),
        FactStat(0.0, False, False, None, 2, 0),
    ]
    people = [{"P1": p1[0], "P2": p2[0]}, {"P1": p1[1], "P2": p2[1]}, {"P1": p1[1]}]
    cohort = [["P1", "P2"], ["P1"]]  # P1 twice, P2 once
    n = null_cohort_stats(cohort, {"P1": p1, "P2": p2}, people)
    assert n.mean_memorization == pytest.approx((2 * 0.25 + 0.125) / 3)
    assert n.lenient == pytest.approx((2 * 0.5 + 0.25) / 3) and n.strict == 0.0
    assert n.z_star == pytest.approx(3 / 1.25)  # (2·½·2 + ¼·4) / (2·½ + ¼)
    # {P1, P2}: people 1 and 2 have both, only person 2 memorizes neither -> 1/2; {P1}: persons 2, 3 of 3 -> 2/3
    assert n.zero_memorization == pytest.approx((1 / 2 + 2 / 3) / 2)
    # no null person with the properties: independence, (1 − ½)(1 − ¼) and (1 − ½)
    assert null_cohort_stats(cohort, {"P1": p1, "P2": p2}, []).zero_memorization == pytest.approx((0.375 + 0.5) / 2)


def test_the_worked_example_of_the_docs():
    """docs/measures.md, "Null calibration": 200 null facts for occupation over 11 templates."""
    at_one = [1.2, 1.9, 2.2, 2.4, 2.6, 2.7, 2.9, 3.0, 3.1, 3.3, 3.4, 3.5, 3.7, 3.9, 4.0, 4.2, 4.4, 4.8, 5.1, 5.6, 6.3]
    null = EmpiricalNull(
        [FactStat(0.0, False, False, None, 11, 0)] * 176
        + [FactStat(1 / 11, False, True, z, 11, 1) for z in at_one]
        + [FactStat(2 / 11, False, True, z, 11, 2) for z in (2.5, 3.8, 4.6)]
    )
    a = FactStat(2 / 11, False, True, 4.1, 11, 2)  # beaten only by (2/11, 4.6)
    b = FactStat(1 / 11, False, True, 6.0, 11, 1)  # beaten by the three at 2/11 and by (1/11, 6.3)
    c = FactStat(5 / 11, False, True, 3.0, 11, 5)  # beaten by none
    assert null.p_value(a) == pytest.approx(2 / 201) and null.p_value(b) == pytest.approx(5 / 201)
    assert null.p_value(c) == pytest.approx(1 / 201)
    lenient, strict = null.rate(lambda f: f.lenient), null.rate(lambda f: f.strict)
    assert (lenient.k, round(lenient.low, 3), round(lenient.high, 3)) == (24, 0.078, 0.173)
    assert (strict.k, strict.low, round(strict.high, 4)) == (0, 0.0, 0.0183)
    policy = null.pvalue_rate(0.01)  # (2/11, 4.6) -> 1/200 and (2/11, 3.8) -> 2/200
    assert (policy.k, round(policy.low, 4), round(policy.high, 4)) == (2, 0.0012, 0.0357)
    # BH at q = 0.05 over a, b, c and a fact at p = 1: bounds 0.0125, 0.025, 0.0375, 0.05 -> a, b and c
    assert benjamini_hochberg([null.p_value(a), null.p_value(b), null.p_value(c), 1.0], 0.05) == pytest.approx(5 / 201)
