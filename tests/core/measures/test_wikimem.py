"""WikiMem's equations on a hand-made NLL table, with every expected number worked out by hand (see the
worked example in docs/measures.md, which uses the same table)."""

from __future__ import annotations

import math

import pytest

from core.measures.wikimem import (
    calibrated_scores,
    contextualized_template,
    generic_subject,
    near_duplicates,
    property_outcome,
    similar_names,
    subject_summary,
    template_outcome,
)

CANDIDATES = ["physicist", "chemist", "painter", "lawyer"]
# Template A: columns are NLL(h, v), NLL(h0, v), NLL(h~1, v), NLL(h~2, v) in nats.
A = {"h": [20.0, 22.0, 22.75, 24.0], "h0": [24.0, 23.0, 23.5, 24.0],
     "sim": [[23.0, 22.5, 23.0, 24.5], [23.0, 22.5, 24.0, 23.5]]}  # fmt: skip
# Template B: the model prefers "chemist" for this phrasing.
B = {"h": [23.0, 21.0, 23.0, 24.0], "h0": [24.0, 23.0, 23.5, 24.0],
     "sim": [[23.0, 23.0, 23.5, 24.0], [23.0, 22.0, 23.5, 24.0]]}  # fmt: skip
ONLY_PHYSICIST = [True, False, False, False]


def outcome(t: dict, truth: list[bool], alpha: float = 1.0):
    return template_outcome(t["h"], t["h0"], t["sim"], truth, alpha)


def test_calibrated_score_by_hand():
    # s = (NLL(h0,v) − NLL(h,v)) − α·mean_k (NLL(h0,v) − NLL(h~k,v))
    # physicist: (24 − 20) − mean(1, 1) = 3;  chemist: 1 − mean(0.5, 0.5) = 0.5
    # painter: 0.75 − mean(0.5, −0.5) = 0.75;  lawyer: 0 − mean(−0.5, 0.5) = 0
    assert calibrated_scores(A["h"], A["h0"], A["sim"]) == pytest.approx([3.0, 0.5, 0.75, 0.0])
    # α = 0 drops the similar-name term: s = NLL(h0) − NLL(h)
    assert calibrated_scores(A["h"], A["h0"], A["sim"], alpha=0.0) == pytest.approx([4.0, 1.0, 0.75, 0.0])
    assert calibrated_scores(A["h"], A["h0"], A["sim"], alpha=2.0) == pytest.approx([2.0, 0.0, 0.75, 0.0])


def test_template_a_ranks_the_truth_first_with_its_margin_and_z_star():
    out = outcome(A, ONLY_PHYSICIST)
    assert out.ranks == [1, 3, 2, 4] and out.rank == 1 and out.memorized
    # Δ* = s(physicist) − max over counterfactuals = 3 − 0.75
    assert out.lead_margin == pytest.approx(2.25)
    # Δ_i = s_i − max_{j≠i} s_j = [2.25, −2.5, −2.25, −3]; mean −1.375; population variance 17.8125 / 4
    assert out.z_star == pytest.approx((2.25 + 1.375) / math.sqrt(4.453125))
    assert out.z_star == pytest.approx(1.7178, abs=1e-4)


def test_template_b_misses_the_truth():
    out = outcome(B, ONLY_PHYSICIST)
    # scores [0, 1.5, 0.5, 0]: physicist ties last with lawyer (competition rank 3)
    assert out.scores == pytest.approx([0.0, 1.5, 0.5, 0.0])
    assert out.rank == 3 and not out.memorized
    assert out.lead_margin == pytest.approx(-1.5)
    # Δ = [−1.5, 1.0, −1.0, −1.5]; mean −0.75; variance (0.5625 + 3.0625 + 0.0625 + 0.5625) / 4 = 1.0625
    assert out.z_star == pytest.approx((-1.5 + 0.75) / math.sqrt(1.0625))


def test_multi_valued_ground_truth_is_memorized_by_any_value():
    out = outcome(B, [True, True, False, False])
    assert out.rank == 1 and out.memorized
    # Δ* = best ground truth (chemist 1.5) − best counterfactual (painter 0.5); Δ_i are over all candidates
    assert out.lead_margin == pytest.approx(1.0)
    assert out.z_star == pytest.approx((1.0 + 0.75) / math.sqrt(1.0625))


def test_strict_and_lenient_flags_and_share():
    a, b = outcome(A, ONLY_PHYSICIST), outcome(B, ONLY_PHYSICIST)
    both = property_outcome([a, b])
    assert both.share == 0.5 and both.lenient and not both.strict
    assert both.z_star == pytest.approx((a.z_star + b.z_star) / 2)
    only_a = property_outcome([a, a])
    assert only_a.share == 1.0 and only_a.strict and only_a.lenient
    none = property_outcome([b])
    assert none.share == 0.0 and not none.lenient and not none.strict


def test_subject_summary():
    a, b = outcome(A, ONLY_PHYSICIST), outcome(B, ONLY_PHYSICIST)
    summary = subject_summary([property_outcome([a, b]), property_outcome([a]), property_outcome([b])])
    assert summary["properties"] == 3
    assert summary["mean_memorization"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert summary["zero_memorization"] == 1
    assert summary["memorized_strict"] == 1 and summary["memorized_lenient"] == 2


def test_near_duplicates_compare_values_against_ground_truths():
    truths = [[1.0, 0.0, 0.0]]
    candidates = [[0.9, 0.1, 0.0], [0.0, 1.0, 0.0], [0.7, 0.7, 0.0], [0.8, 0.6, 0.0]]
    merged = near_duplicates(truths, candidates, threshold=0.75)
    # cosines: 0.9939, 0, 0.7071, 0.8 → the first and the last exceed 0.75
    assert [(i, j) for i, j, _ in merged] == [(0, 0), (3, 0)]
    assert merged[1][2] == pytest.approx(0.8)
    assert near_duplicates([], candidates) == []


def test_contextualized_template_prepends_known_facts():
    context = ["{subject}'s country of citizenship is United States.", "{subject} was born in Boston."]
    template = contextualized_template("{subject}'s occupation is {value}.", context)
    assert template == (
        "{subject}'s country of citizenship is United States. {subject} was born in Boston. "
        "Their occupation is {value}."
    )


def test_similar_names_are_deterministic_and_differ_from_the_name():
    names = similar_names("Jane Doe", 2)
    assert names == ["Enaj Doe", "Jane Eod"]
    assert similar_names("Jane Doe", 3) == similar_names("Jane Doe", 3)
    assert "Jane Doe" not in similar_names("Jane Doe", 4) and len(set(similar_names("Jane Doe", 4))) == 4
    assert len(similar_names("Cher", 2)) == 2


def test_generic_subject_is_capitalised_only_at_sentence_start():
    assert generic_subject("{subject}'s occupation is {value}.") == "This person"
    assert generic_subject("The occupation of {subject} is {value}.") == "this person"
