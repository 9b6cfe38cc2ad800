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
    ranks,
    similar_names,
    subject_summary,
    template_outcome,
    truth_log_share,
    z_star,
)

CANDIDATES = ["physicist", "chemist", "painter", "lawyer"]
# Template A: columns are NLL(h, v), NLL(h0, v), NLL(h~1, v), NLL(h~2, v) in nats.
A = {
    "h": [20.0, 22.0, 22.75, 24.0],
    "h0": [24.0, 23.0, 23.5, 24.0],
    "sim": [[23.0, 22.5, 23.0, 24.5], [23.0, 22.5, 24.0, 23.5]],
}
# Template B: the model prefers "chemist" for this phrasing.
B = {
    "h": [23.0, 21.0, 23.0, 24.0],
    "h0": [24.0, 23.0, 23.5, 24.0],
    "sim": [[23.0, 23.0, 23.5, 24.0], [23.0, 22.0, 23.5, 24.0]],
}
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
    # scores [0, 1.5, 0.5, 0]: physicist ties last with lawyer; ties go against the truth, so it ranks 4th
    assert out.scores == pytest.approx([0.0, 1.5, 0.5, 0.0])
    assert out.ranks == [4, 1, 2, 3] and out.rank == 4 and not out.memorized
    assert out.lead_margin == pytest.approx(-1.5)
    # z* is defined only where a truth ranks first (the formula would give (−1.5 + 0.75) / √1.0625 here)
    assert out.z_star is None
    assert z_star(out.scores, ONLY_PHYSICIST) == pytest.approx((-1.5 + 0.75) / math.sqrt(1.0625))


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
    assert both.z_star == pytest.approx(a.z_star), "z̄* averages the rank-1 templates only"
    only_a = property_outcome([a, a])
    assert only_a.share == 1.0 and only_a.strict and only_a.lenient
    none = property_outcome([b])
    assert none.share == 0.0 and not none.lenient and not none.strict and none.z_star is None


def test_subject_summary():
    a, b = outcome(A, ONLY_PHYSICIST), outcome(B, ONLY_PHYSICIST)
    summary = subject_summary([property_outcome([a, b]), property_outcome([a]), property_outcome([b])])
    assert summary["properties"] == 3
    assert summary["mean_memorization"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert summary["mean_z_star"] == pytest.approx(a.z_star), "over the two rank-1 templates, both A"
    assert summary["properties_not_memorized"] == 1 and "zero_memorization" not in summary
    assert summary["rank1_all"] == 1 and summary["rank1_any"] == 2
    # the old names, deprecated for one release (``memorized`` is the verdict's word alone)
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


def test_ties_never_rank_a_truth_first():
    # A model that scores every candidate alike knows nothing; the truth comes first in the candidate list,
    # so a tie must not hand it rank 1 by position.
    k = 101
    truth = [True] + [False] * (k - 1)
    flat = [20.0] * k
    out = template_outcome(flat, flat, [flat, flat], truth)
    assert out.rank == k and not out.memorized and out.z_star is None
    # a truth tied with one counterfactual at the top ranks second; the counterfactual first
    assert ranks([2.0, 2.0, 1.0], [True, False, False]) == [2, 1, 3]
    # counterfactuals that tie among themselves share the better rank (competition ranking)
    assert ranks([3.0, 2.0, 2.0, 1.0], [True, False, False, False]) == [1, 2, 2, 4]
    assert ranks([2.0, 2.0, 1.0]) == [1, 1, 3], "without a truth mask: plain competition ranks"


def test_generic_subject_cancels_at_alpha_one():
    # s = [h0 − h] − α·mean[h0 − h~] = mean h~ − h at α = 1: NLL(h0) need not be scored
    assert calibrated_scores(A["h"], None, A["sim"], alpha=1.0) == pytest.approx(
        calibrated_scores(A["h"], A["h0"], A["sim"], alpha=1.0)
    )
    with pytest.raises(ValueError, match="alpha = 1"):
        calibrated_scores(A["h"], None, A["sim"], alpha=0.5)
    with pytest.raises(ValueError, match="similar names"):
        calibrated_scores(A["h"], None, [], alpha=1.0)


def test_z_star_at_a_chance_rank_one_is_near_three():
    """The docs' reading of z*: on k = 101 independent normal scores, the truth ranks first 1 time in 101, and
    then z* averages ≈ 2.85 (docs/measures.md): z* ≈ 3 is what chance produces, not strong evidence."""
    import numpy as np

    rng = np.random.default_rng(0)
    k, trials = 101, 30_000
    truth = [True] + [False] * (k - 1)
    zs, all_z = [], []
    for _ in range(trials):
        scores = rng.standard_normal(k).tolist()
        out = template_outcome([-s for s in scores], [0.0] * k, [], truth, alpha=0.0)
        all_z.append(z_star(out.scores, truth))
        if out.memorized:
            zs.append(out.z_star)
    rate, mean_rank1, mean_all = len(zs) / trials, float(np.mean(zs)), float(np.mean(all_z))
    message = f"rank-1 rate {rate:.4f}, mean z* over rank-1 templates {mean_rank1:.2f}, over all {mean_all:.2f}"
    assert abs(rate - 1 / k) < 0.003 and 2.6 < mean_rank1 < 3.1 and abs(mean_all) < 0.05, message


# Runs in a fresh interpreter (a subprocess with a time limit): the line count needs sys.settrace, and once, late in
# a whole-suite run, a test process that had run e2e files before spun forever at this trace's first event; a child
# process cannot inherit that state, and a timeout turns any hang into a failure with its output.
_BOUNDED = """
import json, sys
from core.measures.wikimem import similar_names

class LoopBound(Exception):
    pass

MAX_LINES = 2_000_000
out = []
for name, n in json.loads(sys.stdin.read()):
    count = 0

    def tracer(frame, event, arg):
        global count
        if event == "line":
            count += 1
            if count > MAX_LINES:
                raise LoopBound(f"more than {MAX_LINES} lines executed")
        return tracer

    sys.settrace(tracer)
    try:
        names = similar_names(name, n)
    finally:
        sys.settrace(None)
    out.append([names, count])
print(json.dumps(out))
"""


def run_bounded(calls: list[tuple[str, int]]) -> list[tuple[list[str], int]]:
    """``similar_names(name, n)`` for each call, with the number of lines it executed (its callees included); a
    call past 2,000,000 lines fails instead of hanging."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    run = subprocess.run(
        [sys.executable, "-c", _BOUNDED],
        input=json.dumps(calls),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return [(names, lines) for names, lines in json.loads(run.stdout)]


ADVERSARIAL = [
    "X",
    "Li",
    "王",
    "Aaa",
    "\u200b\u200b\u200b",
    "😀",
    "😀 😀",
    "A" * 200,
    "Al Bo",
    "Jane Doe",
    "a b c",
    "Ёж",
    "Jean-Luc O'Neil",
    "Anna",
    "Bob Bob",
]


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_similar_names_always_terminate(name):
    import unicodedata

    sizes = (1, 2, 4, 10)
    for n, (names, lines) in zip(sizes, run_bounded([(name, n) for n in sizes]), strict=True):
        assert lines < 500_000, f"{lines} lines for n={n}"
        assert len(names) == len(set(names)) and name not in names and len(names) <= n
        assert names == similar_names(name, n), "deterministic"
        letters = sum(unicodedata.category(c).startswith("L") for c in name)
        if letters:
            # the stated rule: a name with a letter always gets n variants (n ≤ 10 ≤ 20 substitutions per letter)
            assert len(names) == n, f"{len(names)} variants of a name with {letters} letters, n={n}"
        else:
            assert names == [], "a name without letters has nothing to vary (the API refuses it)"


def test_similar_names_keep_the_papers_reversals_first():
    assert run_bounded([("Al Bo", 10)])[0][0][:2] == ["La Bo", "Al Ob"]
    assert similar_names("Jane Doe", 4)[:2] == ["Enaj Doe", "Jane Eod"]


def test_truth_log_share_by_hand() -> None:
    # best truth 2.0 (the other truth, 1.0, is left out), counterfactuals 0.0 and 2.0: log(e^2 / (e^2 + e^0 + e^2))
    assert truth_log_share([1.0, 2.0, 0.0, 2.0], [True, True, False, False]) == pytest.approx(
        2.0 - math.log(2 * math.exp(2.0) + 1.0)
    )
    assert truth_log_share([1000.0, 0.0], [True, False]) == pytest.approx(-math.exp(-1000.0), abs=1e-12)  # stable
