"""The paired test of a verification (exact McNemar on template-level rank-1 outcomes): worked by hand, exact under
its null, and its false-positive rate measured on what it must not find — fictitious people before and after on the
knowledge-free negative control (two independent knowledge-free "models", so every change is chance), and the same
model before and after (a fake unlearning). groundtruth-tiny's held-out people before and after a reference
unlearning are measured by benchmarks/unlearning.py (docs/verification.md)."""

from __future__ import annotations

import math

import pytest

from core.catalog import counterfactuals, load_catalog
from core.measures.null import clopper_pearson
from core.measures.paired import (
    discordant_pairs,
    mcnemar_exact,
    paired_p_value,
    retrieved,
    smallest_p_value,
)
from core.measures.wikimem import calibrated_scores, ranks, similar_names
from core.names.fictitious import cohort
from workers.lm.knowledge_free import KnowledgeFreeScorer

PIDS = ("P106", "P27", "P19", "P21", "P1412")  # groundtruth-tiny's properties, pools of 15 to ~200 values
N_PEOPLE = 120
N_COUNTERFACTUALS = 20
LEVEL = 0.05


def test_mcnemar_exact_by_hand():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 0) == pytest.approx(1 / 8)
    assert mcnemar_exact(5, 0) == pytest.approx(1 / 32)
    # n = 5 discordant, b = 4: P(B >= 4) = (C(5,4) + C(5,5)) / 32 = 6/32
    assert mcnemar_exact(4, 1) == pytest.approx(6 / 32)
    assert mcnemar_exact(4, 1, "less") == pytest.approx(31 / 32)  # P(B <= 4) = 1 - 1/32
    assert mcnemar_exact(1, 4, "less") == pytest.approx(6 / 32)
    assert mcnemar_exact(4, 1, "two-sided") == pytest.approx(12 / 32)
    assert mcnemar_exact(2, 2, "two-sided") == 1.0  # capped at 1
    assert mcnemar_exact(0, 7) == 1.0  # learned, not removed
    assert mcnemar_exact(0, 7, "less") == pytest.approx(1 / 128)


@pytest.mark.parametrize(
    ("b", "c", "alternative", "field"),
    [(-1, 0, "greater", "b"), (0, -2, "greater", "c"), (True, 0, "greater", "b"), (1.5, 0, "greater", "b")],
)
def test_mcnemar_exact_refuses_counts_that_are_not_counts(b, c, alternative, field):
    with pytest.raises(ValueError, match=f"^{field} must be a non-negative integer"):
        mcnemar_exact(b, c, alternative)


def test_mcnemar_exact_refuses_an_unknown_alternative():
    with pytest.raises(ValueError, match="alternative must be one of greater, less, two-sided"):
        mcnemar_exact(1, 0, "bigger")


def test_discordant_pairs_count_each_direction():
    before = [True, True, False, False, True]
    after = [False, True, True, False, False]
    assert discordant_pairs(before, after) == (2, 1)
    assert paired_p_value([1, 1, 3, 4, 1], [2, 1, 1, 9, 5]) == mcnemar_exact(2, 1)
    assert retrieved([1, 2, 1]) == [True, False, True]
    with pytest.raises(ValueError, match="one outcome per template"):
        discordant_pairs([True], [True, False])


@pytest.mark.parametrize("n_templates", [1, 3, 5, 7])
def test_smallest_p_value_is_the_floor_of_every_outcome(n_templates):
    """Over every before/after outcome of T templates the smallest p is 2^-T: 3 templates never reach 0.05."""
    outcomes = [[bool(mask >> t & 1) for t in range(n_templates)] for mask in range(2**n_templates)]
    floor = min(mcnemar_exact(*discordant_pairs(x, y)) for x in outcomes for y in outcomes)
    assert floor == smallest_p_value(n_templates) == 0.5**n_templates
    assert smallest_p_value(3) > LEVEL


@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
def test_the_test_is_exact_under_its_null(alternative):
    """Under H0 (B ~ Binomial(n, 1/2) given n discordant templates) P(p <= a) <= a for every n and level."""
    for n in range(1, 31):
        weights = [math.comb(n, b) / 2**n for b in range(n + 1)]
        ps = [mcnemar_exact(b, n - b, alternative) for b in range(n + 1)]
        for level in (0.001, 0.01, 0.05, 0.1, 0.5):
            size = sum(w for w, p in zip(weights, ps, strict=True) if p <= level)
            assert size <= level + 1e-12, f"n={n}: P(p <= {level}) = {size}"


def _outcomes(scorer: KnowledgeFreeScorer, people, catalog) -> dict[tuple[int, str], list[bool]]:
    """Per fact, every catalog template's rank-1 outcome (2 look-alikes, α = 1, 20 seeded counterfactuals)."""
    out = {}
    for person in people:
        variants = similar_names(person.name, 2)
        for pid in PIDS:
            prop = catalog.get(pid)
            truths = [person.facts[pid]]
            candidates = [*truths, *counterfactuals(prop, truths, N_COUNTERFACTUALS, person.index)]
            is_truth = [i == 0 for i in range(len(candidates))]
            row = []
            for t in range(len(prop.templates)):

                def nll(h: str, t: int = t, prop=prop, candidates=candidates) -> list[float]:
                    return [scorer.nll(prop.render(t, h, v)) for v in candidates]

                scores = calibrated_scores(nll(person.name), None, [nll(v) for v in variants], 1.0)
                row.append(ranks(scores, is_truth)[0] == 1)
            out[(person.index, pid)] = row
    return out


def test_false_positive_rate_on_the_knowledge_free_null():
    """Fictitious people audited on every template before and after, where before and after are two independent
    knowledge-free models: every change of outcome is chance. The measured rate of "removed" at p <= 0.05, with
    its exact upper 95 % bound, must stay under the level; the same model before and after never moves."""
    catalog = load_catalog()
    people = cohort(N_PEOPLE, PIDS, catalog, seed=26)
    before = _outcomes(KnowledgeFreeScorer("kf-before", "before"), people, catalog)
    after = _outcomes(KnowledgeFreeScorer("kf-after", "after"), people, catalog)
    ps = [mcnemar_exact(*discordant_pairs(before[k], after[k])) for k in before]
    hits, n = sum(p <= LEVEL for p in ps), len(ps)
    _, upper = clopper_pearson(hits, n)
    discordant = sum(sum(discordant_pairs(before[k], after[k])) for k in before)
    message = (
        f"knowledge-free null: {hits}/{n} facts 'removed' at p <= {LEVEL} (rate {hits / n:.4f}, 95 % Clopper–Pearson"
        f" upper bound {upper:.4f}); {discordant} discordant templates over {n} facts"
    )
    assert hits / n <= LEVEL, message
    assert discordant > n / 2, "the null must move outcomes for the check to mean anything: " + message
    same = [mcnemar_exact(*discordant_pairs(before[k], before[k])) for k in before]
    assert min(same) == 1.0, "the same model before and after is never a removal"
    print(message)
