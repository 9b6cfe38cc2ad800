"""The misattribution statistic worked out by hand, and what it must not find."""

from __future__ import annotations

import math
import random

import pytest

from core.measures.misattribution import misattribution, template_leads
from core.measures.null import set_stats


def test_soft_leads_by_hand():
    # candidates: truth 1.0, counterfactuals 3.0, 0.0, -1.0
    scores, truth = [1.0, 3.0, 0.0, -1.0], [True, False, False, False]
    leads = template_leads(scores, truth)
    assert leads[0] is None  # a true value is never a falsehood
    assert leads[1] == pytest.approx(3.0 - math.log(math.e + 1 + math.exp(-1)))  # against the truth and the rest
    assert leads[2] == pytest.approx(0.0 - math.log(math.e + math.exp(3) + math.exp(-1)))
    # a value far ahead leads by its margin over the best other, less log(1 + e^-(the gap to the next)); two values
    # tied far ahead each lead by -log(1 + e^-10): each is outweighed by the other
    assert template_leads([0.0, 10.0, 1.0], [True, False, False])[1] == pytest.approx(9.0 - math.log(1 + math.exp(-1)))
    tied = template_leads([0.0, 10.0, 10.0], [True, False, False])
    assert tied[1] == tied[2] == pytest.approx(-math.log(1 + math.exp(-10)), abs=1e-9)


def test_the_best_false_value_over_templates():
    truth = [True, False, False]
    rows = [[0.0, 2.0, 1.0], [0.0, -1.0, 1.0]]  # value 1 leads under the first template, value 2 under the second
    lead = lambda s, others: s - math.log(sum(math.exp(x) for x in others))  # noqa: E731
    one = (lead(2.0, [0.0, 1.0]) + lead(-1.0, [0.0, 1.0])) / 2
    two = (lead(1.0, [0.0, 2.0]) + lead(1.0, [0.0, -1.0])) / 2
    value, index = misattribution(rows, truth)
    assert (index, value) == ((1, pytest.approx(one)) if one >= two else (2, pytest.approx(two)))
    assert misattribution(rows, [True, True, True]) is None and misattribution([], truth) is None


def test_a_merged_near_duplicate_is_no_falsehood():
    rows = [[0.0, 5.0, 1.0, 0.5]]
    assert misattribution(rows, [True, False, False, False])[1] == 1
    assert misattribution(rows, [True, True, False, False])[1] == 2  # value 1 merged into the truth


def test_at_chance_the_statistic_is_centred_below_zero():
    """Scores drawn alike for every candidate (a model that knows nothing): the best of 20 false values rarely
    outweighs the 20 other candidates together (M > 0 in under 5 % of 2,000 facts)."""
    rng = random.Random(5)
    truth = [True] + [False] * 20
    ms = [misattribution([[rng.gauss(0, 1) for _ in truth] for _ in range(3)], truth)[0] for _ in range(2000)]
    assert sum(m > 0 for m in ms) / len(ms) < 0.05 and sum(ms) / len(ms) < -1.0


def test_the_null_computes_it_for_every_shape():
    rng = random.Random(7)
    rows = [[rng.gauss(0, 1) for _ in range(8)] for _ in range(3)]
    for members, stat in zip([[0], [0, 1], [2, 3, 4]], set_stats(rows, [[0], [0, 1], [2, 3, 4]]), strict=True):
        mask = [j in members for j in range(8)]
        assert stat.misattribution == pytest.approx(misattribution(rows, mask)[0])
        assert stat.n_values == len(members)
