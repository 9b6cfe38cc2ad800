"""The paired test of a verification: did one fact's retrieval change between a *before* and an *after* model?

A verification audits the same fact with the same configuration (templates, counterfactual draws, look-alikes,
seed) on both models, so every template gives a *pair* of outcomes: the best true value ranked first (retrieved)
before, and after. The test is the **exact McNemar test** (Conover 1999, §3.5; McNemar 1947) on those pairs,
i.e. the binomial sign test on the discordant ones:

    b = #{templates retrieved before and not after}      c = #{templates not retrieved before, retrieved after}

Under H0 (the after model retrieves the fact as the before model does: each template's two outcomes are
exchangeable), a discordant template is a fair coin: B ~ Binomial(b + c, 1/2) given b + c, and

    p_greater = P(B >= b) = 2^-(b+c) · Σ_{k=b}^{b+c} C(b + c, k)       (evidence of removal)
    p_less    = P(B <= b)                                              (evidence of (re)learning)
    p_two     = min(1, 2 · min(p_greater, p_less))

Concordant templates (retrieved both times, or neither) carry no evidence and do not enter. With no discordant
template p = 1.

**Why this test, and not a permutation test on the calibrated scores.** (1) Its unit is what the verdict is
about: a template whose true value ranks first is a retrieval, as in WikiMem (Staufer 2025) and the forget set.
(2) Rank 1 is decided *within* one model, so the test is blind to a change of score scale between the models:
unlearning moves every NLL, and the calibrated scores (and truth z) of an after model are not on the before
model's scale — a paired permutation (sign-flip) test on score differences reads a global shift as evidence, a
rank-1 outcome does not. (3) It is exact for any number of templates (no normal approximation), valid under
exchangeability alone. (4) The sign-flip permutation test on T per-template differences has the same floor as
this one, 2^-T (its 2^T sign patterns), so it buys no resolution where the test is weakest.

**Power is bounded by the number of templates.** The smallest p a fact can reach is 2^-T with T templates all
retrieved before and none after (:func:`smallest_p_value`): 3 templates (the audit default) can never give
p < 0.125; p <= 0.05 needs 5 discordant templates, p <= 0.01 needs 7. A verification that wants a per-fact paired
verdict should score every catalog template (11 per property on ``groundtruth-tiny``; minimum p = 1/2048) and
report a fact whose templates cannot reach the level as inconclusive, never as unchanged.

The false-positive rate on the null is measured in tests/core/measures/test_paired.py (knowledge-free before and
after models, and the same model before and after) and on ``groundtruth-tiny``'s held-out people before and after
a reference unlearning of others (benchmarks/unlearning.py; docs/verification.md, "Reference unlearning and the
paired test"). Pure functions (stdlib only).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

ALTERNATIVES = ("greater", "less", "two-sided")


def mcnemar_exact(b: int, c: int, alternative: str = "greater") -> float:
    """Exact McNemar p-value from the discordant counts ``b`` (retrieved before, not after) and ``c`` (not before,
    retrieved after). ``alternative``: ``greater`` (the fact was removed: b exceeds c), ``less`` (it was learned:
    c exceeds b) or ``two-sided``. 1.0 when there is no discordant pair."""
    for label, n in (("b", b), ("c", c)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"{label} must be a non-negative integer count of discordant templates")
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {', '.join(ALTERNATIVES)}")
    n = b + c
    if n == 0:
        return 1.0
    greater = _upper_tail(b, n)
    less = _upper_tail(c, n)  # P(B <= b) = P(C >= c) with C = n - B ~ Binomial(n, 1/2)
    if alternative == "greater":
        return greater
    if alternative == "less":
        return less
    return min(1.0, 2.0 * min(greater, less))


def _upper_tail(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2), exactly (integer sums, one division)."""
    return min(1.0, sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n)


def discordant_pairs(before: Sequence[bool], after: Sequence[bool]) -> tuple[int, int]:
    """(b, c) from one fact's per-template outcomes, ``before[t]`` / ``after[t]`` = the fact's best true value ranked
    first under template t on the before / after model (same templates, same order: the verification re-runs the
    audit's stored configuration). b counts templates retrieved before and not after, c the reverse."""
    if len(before) != len(after):
        raise ValueError("before and after must hold one outcome per template, for the same templates")
    b = sum(1 for x, y in zip(before, after, strict=True) if x and not y)
    c = sum(1 for x, y in zip(before, after, strict=True) if y and not x)
    return b, c


def retrieved(ranks: Sequence[int]) -> list[bool]:
    """Per-template outcomes from the best true value's rank under each template (1 = retrieved)."""
    return [r == 1 for r in ranks]


def paired_p_value(before_ranks: Sequence[int], after_ranks: Sequence[int], alternative: str = "greater") -> float:
    """The paired test of one fact from its per-template best-truth ranks on the before and after models."""
    return mcnemar_exact(*discordant_pairs(retrieved(before_ranks), retrieved(after_ranks)), alternative)


def smallest_p_value(n_templates: int) -> float:
    """The smallest p-value the one-sided test can give a fact audited with ``n_templates`` templates, 2^-T: a
    fact whose templates cannot reach a level is inconclusive at that level, whatever its outcomes."""
    if n_templates < 0:
        raise ValueError("n_templates must be a non-negative integer")
    return 0.5**n_templates
