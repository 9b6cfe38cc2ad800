"""Capacity measures (Morris et al. 2025): bits, capacity, MIA scores and the sigmoid scaling law."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.measures import capacity as cap

# The paper's validation table: (parameters, training samples, predicted loss-based MIA F1).
VALIDATION_TABLE = [
    (1_556_075_200, 170_654_583, 0.55),
    (1_556_075_200, 76_795_021, 0.75),
    (1_556_075_200, 18_851_574, 0.95),
    (123_702_528, 13_566_442, 0.55),
    (123_702_528, 6_104_935, 0.75),
    (123_702_528, 1_498_634, 0.95),
]


@pytest.mark.parametrize(("params", "samples", "expected"), VALIDATION_TABLE)
def test_scaling_law_reproduces_validation_table(params: int, samples: int, expected: float) -> None:
    got = cap.predicted_mia_f1(params, samples)
    assert abs(got - expected) <= 0.01, f"F1({params:,} params, {samples:,} samples) = {got:.4f}, paper {expected}"


def test_scaling_law_limits() -> None:
    p = 123_702_528
    sizes = [10**k for k in range(3, 13)]
    f1s = [cap.predicted_mia_f1(p, n) for n in sizes]
    assert all(a >= b for a, b in zip(f1s, f1s[1:], strict=False)), f"F1 must fall as data grows: {f1s}"
    assert abs(f1s[-1] - 0.5) < 1e-6, f"F1 should reach chance (0.5) for huge datasets, got {f1s[-1]}"
    assert cap.predicted_mia_f1(p, 1e-9) == 1.0, "the fit exceeds 1 for tiny datasets; F1 is capped at 1"
    assert 0.99 < cap.predicted_mia_f1(p, 3 * p / 1000) < 1.0, "just above the cap the law is still below 1"
    with pytest.raises(ValueError):
        cap.predicted_mia_f1(0, 10)


@pytest.mark.parametrize("f1", [0.55, 0.75, 0.95])
def test_dataset_size_for_f1_inverts_the_law(f1: float) -> None:
    p = 1_556_075_200
    n = cap.dataset_size_for_f1(p, f1)
    assert cap.predicted_mia_f1(p, n) == pytest.approx(f1, abs=1e-9), f"round trip failed at F1={f1}: N={n}"
    with pytest.raises(ValueError):
        cap.dataset_size_for_f1(p, 0.5)


def test_entropy_and_memorized_bits() -> None:
    s, v = 8, 16  # 4 bits per token, 32 bits per sequence
    assert cap.dataset_entropy_bits(10, s, v) == 320.0
    nll = np.array([32.0, 20.0, 40.0, 0.0])  # unmemorized, 12 bits memorized, worse than chance, fully memorized
    per = cap.memorized_bits_per_sample(nll, s, v)
    assert per.tolist() == [0.0, 12.0, 0.0, 32.0], f"mem_U per sample wrong: {per}"
    assert cap.memorized_bits(nll, s, v) == 44.0, "worse-than-chance samples must clip at 0, not subtract"


def test_capacity_is_max_over_dataset_sizes() -> None:
    n_best, bits = cap.capacity_bits({100: 5_000.0, 500: 9_000.0, 2_000: 8_200.0})
    assert (n_best, bits) == (500, 9_000.0)
    assert cap.bits_per_parameter(bits, 3_000) == 3.0
    with pytest.raises(ValueError):
        cap.capacity_bits({})


def test_nats_to_bits() -> None:
    assert cap.nats_to_bits([math.log(2.0) * 7])[0] == pytest.approx(7.0)


def test_text_memorization_is_reference_minus_shorter_code() -> None:
    ref = [50.0, 30.0, 10.0]
    target = [20.0, 35.0, 10.0]
    assert cap.text_memorization_bits(ref, target).tolist() == [30.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        cap.text_memorization_bits([1.0], [1.0, 2.0])


def test_mia_scores_separated_random_and_tied() -> None:
    members, nonmembers = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]
    assert cap.mia_auc(members, nonmembers) == 1.0
    assert cap.mia_f1(members, nonmembers) == 1.0
    assert cap.mia_auc(nonmembers, members) == 0.0
    assert cap.mia_f1([5.0, 5.0], [5.0, 5.0]) == 0.5, "all ties: the attack is a coin flip"
    assert cap.mia_auc([5.0, 5.0], [5.0, 5.0]) == 0.5
    # hand-worked: members [1, 4], non-members [2, 3]: pairs (1<2, 1<3, 4>2, 4>3) -> AUC 0.5;
    # the 2 lowest losses are 1 (member) and 2 (non-member) -> precision = recall = 0.5
    assert cap.mia_auc([1.0, 4.0], [2.0, 3.0]) == 0.5
    assert cap.mia_f1([1.0, 4.0], [2.0, 3.0]) == 0.5


def test_mia_on_same_distribution_is_near_chance() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=4000), rng.normal(size=4000)
    assert abs(cap.mia_auc(a, b) - 0.5) < 0.03
    assert abs(cap.mia_f1(a, b) - 0.5) < 0.03
    shifted = cap.mia_auc(a - 1.0, b)
    assert shifted > 0.7, f"a loss shift of one std must be detectable, AUC={shifted:.3f}"


def test_tfidf_rarity_ranks_rare_documents_higher() -> None:
    docs = [["the", "cat"], ["the", "dog"], ["the", "cat"], ["zyx", "qwv"]]
    r = cap.tfidf_rarity(docs)
    assert r[3] > r[1] > r[0], f"rarity order wrong: {r}"
    assert cap.tfidf_rarity([[]]).tolist() == [0.0]


def test_extraction_rate() -> None:
    assert cap.extraction_rate([True, False, True, True]) == 0.75
    assert cap.extraction_rate([]) == 0.0
