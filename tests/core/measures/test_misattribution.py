"""The misattribution statistic worked out by hand, and what it must not find."""

from __future__ import annotations

import math
import random

import pytest

from core.measures.misattribution import misattribution, template_leads
from core.measures.null import set_stats


def test_leads_by_hand():
    # candidates: truth 1.0, counterfactuals 3.0, 0.0, -1.0 -> their mean 2/3, population std sqrt(26/9)
    scores, truth = [1.0, 3.0, 0.0, -1.0], [True, False, False, False]
    std = math.sqrt(((3 - 2 / 3) ** 2 + (2 / 3) ** 2 + (1 + 2 / 3) ** 2) / 3)
    leads = template_leads(scores, truth)
    assert leads[0] is None  # a true value is never a falsehood
    assert leads[1] == pytest.approx((3.0 - 1.0) / std)  # beats the truth by 2
    assert leads[2] == pytest.approx((0.0 - 3.0) / std) and leads[3] == pytest.approx((-1.0 - 3.0) / std)


def test_the_best_false_value_over_templates():
    truth = [True, False, False]
    rows = [[0.0, 2.0, 1.0], [0.0, -1.0, 1.0]]  # value 1 leads under the first template, value 2 under the second
    value, index = misattribution(rows, truth)
    # template 1: std of (2, 1) = 0.5 -> leads 2.0, -2.0; template 2: std of (-1, 1) = 1 -> leads -2.0, 1.0
    # means: value 1 (2.0 - 2.0) / 2 = 0.0, value 2 (-2.0 + 1.0) / 2 = -0.5
    assert index == 1 and value == pytest.approx(0.0)
    assert misattribution(rows, [True, True, True]) is None and misattribution([], truth) is None


def test_a_merged_near_duplicate_is_no_falsehood():
    rows = [[0.0, 5.0, 1.0, 0.5]]
    assert misattribution(rows, [True, False, False, False])[1] == 1
    assert misattribution(rows, [True, True, False, False])[1] == 2  # value 1 merged into the truth


def test_the_null_computes_it_for_every_shape():
    rng = random.Random(7)
    rows = [[rng.gauss(0, 1) for _ in range(8)] for _ in range(3)]
    for members, stat in zip([[0], [0, 1], [2, 3, 4]], set_stats(rows, [[0], [0, 1], [2, 3, 4]]), strict=True):
        mask = [j in members for j in range(8)]
        assert stat.misattribution == pytest.approx(misattribution(rows, mask)[0])
        assert stat.n_values == len(members)
