"""Null calibration of WikiMem verdicts: empirical p-values, false-positive rates per policy, exact binomial
confidence intervals, Benjamini–Hochberg, and the pseudo-truth shortcut. Pure functions (stdlib only).

A *null fact* is a fact about a fictitious person the model cannot know, audited exactly like a real one (same
model, templates, number of counterfactuals, α, look-alike scheme). Its statistics are what chance — and whatever
the model infers from the name — produce. For an audited fact with statistic T:

    p = (1 + #{null facts with T_null ≥ T}) / (1 + N)

(the +1 counts the observed fact among the null draws, so p is a valid p-value — P(p ≤ x) ≤ x under the null —
and never 0). T orders facts by their share of rank-1 templates, then by z̄* (the mean z* over the rank-1
templates) — the two numbers the service reports; a share with no rank-1 template has no z̄* and ranks lowest.
The false-positive rate of a policy is the share of null facts it selects, with a Clopper–Pearson interval.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.measures.wikimem import margins, ranks

SHARE_DIGITS = 9  # shares are k/T; rounding makes equal shares compare equal whatever their float path


class _Template(Protocol):
    memorized: bool
    z_star: float | None


@dataclass(frozen=True)
class FactStat:
    """What the service reports about one fact (subject-property): share, strict, lenient, and z̄* over rank-1
    templates (``n_z`` of them had a defined z*)."""

    share: float
    strict: bool
    lenient: bool
    z_star: float | None
    n_templates: int
    n_z: int = 0

    @property
    def key(self) -> tuple[float, float]:
        """The test statistic, ordered: (share, z̄*); no z̄* ranks below any."""
        return (round(self.share, SHARE_DIGITS), -math.inf if self.z_star is None else self.z_star)


def fact_stat(templates: Sequence[_Template]) -> FactStat:
    """Aggregate one fact's template outcomes (baseline and paraphrases; contextualized canaries excluded)."""
    if not templates:
        raise ValueError("a fact needs at least one template outcome")
    hits = [t.memorized for t in templates]
    zs = [t.z_star for t in templates if t.memorized and t.z_star is not None]
    return FactStat(
        share=sum(hits) / len(hits),
        strict=all(hits),
        lenient=any(hits),
        z_star=sum(zs) / len(zs) if zs else None,
        n_templates=len(hits),
        n_z=len(zs),
    )


class EmpiricalNull:
    """The null facts of one (model, property, audit configuration), sorted for fast p-values."""

    def __init__(self, facts: Sequence[FactStat]) -> None:
        if not facts:
            raise ValueError("a null distribution needs at least one null fact")
        self.facts = list(facts)
        self._keys = sorted(f.key for f in facts)

    def __len__(self) -> int:
        return len(self._keys)

    def at_least(self, stat: FactStat) -> int:
        """How many null facts have a statistic ≥ the given fact's."""
        return len(self._keys) - bisect.bisect_left(self._keys, stat.key)

    def p_value(self, stat: FactStat) -> float:
        return (1 + self.at_least(stat)) / (1 + len(self._keys))

    def leave_one_out_p_values(self) -> list[float]:
        """Each null fact's p-value against the other N − 1: (1 + #{others ≥ it}) / N."""
        n = len(self._keys)
        return [(1 + self.at_least(f) - 1) / n for f in self.facts]

    def rate(self, selects: Callable[[FactStat], bool]) -> Rate:
        return Rate.of(sum(1 for f in self.facts if selects(f)), len(self.facts))

    def pvalue_rate(self, max_p: float) -> Rate:
        """False-positive rate of the policy "p ≤ max_p", each null fact tested against the others."""
        return Rate.of(sum(p <= max_p for p in self.leave_one_out_p_values()), len(self.facts))


@dataclass(frozen=True)
class Rate:
    k: int
    n: int
    rate: float
    low: float  # 95 % Clopper–Pearson interval
    high: float

    @classmethod
    def of(cls, k: int, n: int, confidence: float = 0.95) -> Rate:
        low, high = clopper_pearson(k, n, confidence)
        return cls(k, n, k / n if n else math.nan, low, high)


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p), summed in log space (stable for n in the thousands)."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        for i in range(k + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def _solve(f: Callable[[float], float], target: float) -> float:
    """p in [0, 1] with f(p) = target for a decreasing f (bisection to 1e-12)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval for k successes in n trials: the lower bound solves P(X ≥ k | p) = α/2, the upper
    P(X ≤ k | p) = α/2 (α = 1 − confidence); 0 and 1 at the edges. (0, 1) when n = 0."""
    if not 0 <= k <= n:
        raise ValueError("need 0 <= k <= n")
    if n == 0:
        return 0.0, 1.0
    tail = (1.0 - confidence) / 2
    low = 0.0 if k == 0 else 1.0 - _solve(lambda q: _binom_cdf(n - k, n, q), tail)
    high = 1.0 if k == n else _solve(lambda p: _binom_cdf(k, n, p), tail)
    return low, high


def benjamini_hochberg(pvalues: Sequence[float], q: float) -> float:
    """The Benjamini–Hochberg step-up threshold: the largest p_(i) with p_(i) ≤ i·q/m (sorted ascending, m tests);
    selecting every p ≤ it controls the false discovery rate at q for independent (or positively dependent)
    tests. 0.0 when nothing is selected."""
    ordered = sorted(pvalues)
    m = len(ordered)
    threshold = 0.0
    for i, p in enumerate(ordered, start=1):
        if p <= i * q / m:
            threshold = p
    return threshold


def bh_adjusted(pvalues: Sequence[float]) -> list[float]:
    """BH-adjusted p-values (q-values): min over j ≥ i of m·p_(j)/j, capped at 1, in the input order; a fact is
    selected at level q exactly when its adjusted p-value is ≤ q."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, m * pvalues[i] / rank)
        adjusted[i] = min(1.0, running)
    return adjusted


@dataclass(frozen=True)
class _Outcome:
    memorized: bool
    z_star: float | None


def pseudo_truth_stats(score_rows: Sequence[Sequence[float]]) -> list[FactStat]:
    """The pseudo-truth shortcut: one fictitious subject's calibrated scores (``score_rows[t][i]``: template t,
    candidate i) give a null fact for *every* candidate, each taken as the truth with the others as its
    counterfactuals. Candidate i is rank-1 under template t when no other candidate scores higher (ties share the
    rank, as in the audit), and its z* is (Δ_i − mean Δ) / std Δ, which is what the audit computes when i is the
    only truth (Δ* = Δ_i then). Valid only where the subject's name says nothing about the value: otherwise the
    real truth is favoured over the stand-ins and the shortcut underestimates the false-positive rate."""
    if not score_rows:
        raise ValueError("need at least one template's scores")
    n = len(score_rows[0])
    per_candidate: list[list[_Outcome]] = [[] for _ in range(n)]
    for scores in score_rows:
        if len(scores) != n:
            raise ValueError("every template must score the same candidates")
        rk, deltas = ranks(scores), margins(scores)
        mean = sum(deltas) / n
        std = math.sqrt(sum((d - mean) ** 2 for d in deltas) / n)
        for i in range(n):
            z = (deltas[i] - mean) / std if std > 0 else None
            per_candidate[i].append(_Outcome(rk[i] == 1, z))
    return [fact_stat(outcomes) for outcomes in per_candidate]
