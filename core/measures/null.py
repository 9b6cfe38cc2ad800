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

The statistic (``STATISTIC``, measured against the others in benchmarks/verdict_power.py and docs/measures.md):
the mean over a fact's templates of the best true value's calibrated score in standard deviations of the
counterfactuals' scores above their mean (``core.measures.wikimem.truth_z``). It uses the truth's margin at every
rank (a truth ranked 2nd is evidence too, and a truth first by far is told apart from one first by chance), and it
is continuous, so p-values can be resolved finely. The best of m true values leads by chance more often than one
does, so the null is matched to the fact's shape (m true values; :func:`set_stats`); nulls computed before the
statistic existed keep the older statistic (share of rank-1 templates, then z̄*; ``FactStat.statistic`` is None).
The exact rank p-value of the best true value (:func:`rank_p_value`, :func:`rank_evidence`) was measured as an
alternative and found blind where it matters: every rank-1 fact ties with the null's chance rank-1s.

p-values finer than 1/(N+1): where fewer than ``TAIL_EXCEEDANCES`` null facts reach the observed statistic, the
p-value comes from a generalized Pareto tail fitted to the null's largest values (Knijnenburg et al. 2009,
"Fewer permutations, more accurate P-values", Bioinformatics 25:i161) — :func:`tail_p_value`.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from core.measures.misattribution import misattribution, soft_leads
from core.measures.wikimem import margins, truth_z

SHARE_DIGITS = 9  # shares are k/T; rounding makes equal shares compare equal whatever their float path
STATISTIC = "truth-z-1"  # enters the null's configuration key: bump when the statistic changes
MAX_TRUE_VALUES = 3  # nulls hold facts with 1..3 true values; a fact with more says `uncalibrated`
TAIL_EXCEEDANCES = 10  # below this many null facts ≥ the observed one, the fitted tail gives the p-value
POOL_WEIGHT = 0.9  # a fact with values in and out of the pool: the weight of its pool values' judgment (either_p_value)


class _Template(Protocol):
    memorized: bool
    z_star: float | None
    truth_z: float


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
    statistic: float | None = None  # the verdict statistic (mean truth z); None for results from before it
    n_values: int = 1  # m: the true values ranked together (near-duplicates merged into the truth included)
    in_pool: bool = True  # every true value is a pool value (a null fact: drawn from the pool, else a reservoir)
    misattribution: float | None = None  # the best false candidate's mean lead (core.measures.misattribution)

    @property
    def key(self) -> tuple[float, float]:
        """The test statistic, ordered: the verdict statistic where it exists, else (share, z̄*) with no z̄* below any."""
        if self.statistic is not None:
            return (round(self.statistic, SHARE_DIGITS), 0.0)
        return (round(self.share, SHARE_DIGITS), -math.inf if self.z_star is None else self.z_star)


def rank_p_value(above: int, n_counterfactuals: int, n_truths: int) -> float:
    """q = P(C ≤ c): the chance that at most ``above`` (= c) of n counterfactuals score at or above the best of m true
    values when all n + m candidates are ordered at random. 1 when every counterfactual is above (c ≥ n)."""
    n, m, c = n_counterfactuals, n_truths, above
    if m < 1 or n < 0 or c < 0:
        raise ValueError("need m >= 1 true values, n >= 0 counterfactuals and c >= 0")
    if c >= n:
        return 1.0
    all_above = 1.0  # P(C ≥ c + 1): the top c + 1 places all held by counterfactuals
    for i in range(c + 1):  # bounded by n (the counterfactual count)
        all_above *= (n - i) / (n + m - i)
    return 1.0 - all_above


def rank_evidence(templates: Sequence[tuple[int, int, int]]) -> float:
    """Mean −ln q_t over templates, each given as (best truth rank, n counterfactuals, m true values)."""
    if not templates:
        raise ValueError("a fact needs at least one template outcome")
    return sum(-math.log(rank_p_value(rank - 1, n, m)) for rank, n, m in templates) / len(templates)


def fact_stat(templates: Sequence[_Template], n_values: int | None = None) -> FactStat:
    """Aggregate one fact's template outcomes (baseline and paraphrases; contextualized canaries excluded). With
    ``n_values`` (m, the true values ranked together) the verdict statistic is computed: the mean of the templates'
    ``truth_z``."""
    if not templates:
        raise ValueError("a fact needs at least one template outcome")
    hits = [t.memorized for t in templates]
    zs = [t.z_star for t in templates if t.memorized and t.z_star is not None]
    statistic = None if n_values is None else sum(t.truth_z for t in templates) / len(templates)
    return FactStat(
        share=sum(hits) / len(hits),
        strict=all(hits),
        lenient=any(hits),
        z_star=sum(zs) / len(zs) if zs else None,
        n_templates=len(hits),
        n_z=len(zs),
        statistic=statistic,
        n_values=n_values or 1,
    )


class EmpiricalNull:
    """The null facts of one (model, property, audit configuration), sorted for fast p-values."""

    def __init__(self, facts: Sequence[FactStat], tail: bool = True) -> None:
        """``tail``: whether a fitted tail may give p-values (off for a discrete statistic, such as generation's
        share of true answers: a tail fitted to a few distinct values would not be valid)."""
        if not facts:
            raise ValueError("a null distribution needs at least one null fact")
        self.facts = list(facts)
        self._keys = sorted(f.key for f in facts)
        values = [f.statistic for f in self.facts]
        fitted = tail and all(v is not None for v in values)
        self._values = sorted(values) if fitted else None  # type: ignore[type-var]
        self._shares: list[float] | None = None  # sorted, built on the first share_rate

    def __len__(self) -> int:
        return len(self._keys)

    def at_least(self, stat: FactStat) -> int:
        """How many null facts have a statistic ≥ the given fact's."""
        return len(self._keys) - bisect.bisect_left(self._keys, stat.key)

    def p_value(self, stat: FactStat) -> float:
        """The empirical p-value; where fewer than TAIL_EXCEEDANCES null facts reach the statistic (and the null has
        a statistic to fit), the fitted generalized Pareto tail's (:func:`tail_p_value`)."""
        k = self.at_least(stat)
        if k < TAIL_EXCEEDANCES and stat.statistic is not None and self._values is not None:
            tail = tail_p_value(self._values, stat.statistic)
            if tail is not None:
                return tail
        return (1 + k) / (1 + len(self._keys))

    def p_method(self, stat: FactStat) -> str:
        """How :meth:`p_value` got its number: ``empirical`` or ``tail`` (the fitted tail)."""
        k = self.at_least(stat)
        fitted = stat.statistic is not None and self._values is not None
        if k < TAIL_EXCEEDANCES and fitted and tail_p_value(self._values, stat.statistic) is not None:  # type: ignore[arg-type]
            return "tail"
        return "empirical"

    def leave_one_out_p_values(self) -> list[float]:
        """Each null fact's p-value against the other N − 1: (1 + #{others ≥ it}) / N, or the tail fitted to the
        other N − 1 where fewer than TAIL_EXCEEDANCES of them reach it (as :meth:`p_value` would compute it)."""
        n = len(self._keys)
        out = []
        for f in self.facts:
            k = self.at_least(f) - 1
            p = (1 + k) / n
            if k < TAIL_EXCEEDANCES and f.statistic is not None and self._values is not None:
                others = list(self._values)
                others.remove(f.statistic)
                tail = tail_p_value(others, f.statistic)
                p = tail if tail is not None else p
            out.append(p)
        return out

    def share_rate(self, share: float) -> Rate:
        """The rate of null facts whose share is at least ``share`` (both to 9 places: float noise never decides)."""
        if self._shares is None:
            self._shares = sorted(round(f.share, 9) for f in self.facts)
        return Rate.of(len(self._shares) - bisect.bisect_left(self._shares, round(share, 9)), len(self._shares))

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
    terms = [c + i * log_p + (n - i) * log_q for i, c in enumerate(_log_choose(k, n))]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


@functools.lru_cache(maxsize=256)
def _log_choose(k: int, n: int) -> tuple[float, ...]:
    """log C(n, i) for i = 0..k, as ``_binom_cdf`` sums them (the same floats: its bisection asks for the same (k, n)
    at 60 values of p, and the log-gamma terms were most of its time)."""
    return tuple(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(k + 1))


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


@functools.lru_cache(maxsize=4096)
def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval for k successes in n trials: the lower bound solves P(X ≥ k | p) = α/2, the upper
    P(X ≤ k | p) = α/2 (α = 1 − confidence); 0 and 1 at the edges. (0, 1) when n = 0.

    Cached: each bound is 60 bisection steps over an O(k) sum, and a facts page asks for the same few (k, n) — each
    policy's rate of each null — once per fact (py-spy: 2.7 % of the ground-truth calibration e2e, most of its
    GET /facts reads)."""
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


TAIL_MIN_NULL = 40  # a null smaller than this gets no fitted tail (too few points above any threshold)
TAIL_SHARE = 8  # the tail is fitted to the null's top 1/TAIL_SHARE (at most 250 values) ...
TAIL_FIT_MIN = 25  # ... and to at least this many (a null of N < 100: its top quarter, at least TAIL_EXCEEDANCES)


def tail_p_value(null_values: Sequence[float], observed: float, share: int = TAIL_SHARE) -> float | None:
    """P(T ≥ observed) from a generalized Pareto distribution fitted to the null's upper tail (Knijnenburg et al.
    2009): the threshold u is the value just below the top eighth of the null (at most 250 exceedances, at least
    TAIL_FIT_MIN; a null of fewer than 100 facts: its top quarter, at least TAIL_EXCEEDANCES), the exceedances
    y = T − u are fitted by the method of moments, and

        p = (N_exc / N) · (1 + ξ (observed − u) / σ)^(−1/ξ)        (ξ = 0: exp(−(observed − u)/σ))

    The shape ξ is clamped at 0 from below (an exponential tail): a bounded tail (ξ < 0) would give p = 0 beyond
    its end point. Clamping errs towards larger p where the null's tail is lighter than exponential (a
    knowledge-free model's statistic is near normal), the more so the lower u: fitted to the top quarter, the
    knowledge-free model was flagged at 0.35 % at p ≤ 0.01; to the top eighth (``TAIL_SHARE``; ``share``), at its
    nominal rate, while real models' nulls stay at theirs (benchmarks/fitted_tail.py, docs/measures.md). None where
    no tail can be fitted (fewer than TAIL_MIN_NULL null values, the observed value not above u, or no spread among
    the exceedances): use the empirical p-value."""
    ordered = sorted(null_values)
    n = len(ordered)
    if n < TAIL_MIN_NULL:
        return None
    n_exc = min(250, max(TAIL_EXCEEDANCES, n // share, min(TAIL_FIT_MIN, n // 4)))
    u = ordered[n - n_exc - 1]
    y = [v - u for v in ordered[n - n_exc :] if v > u]
    if observed <= u or len(y) < TAIL_EXCEEDANCES:
        return None
    mean = sum(y) / len(y)
    var = sum((v - mean) ** 2 for v in y) / (len(y) - 1)
    if mean <= 0.0 or var <= 0.0:
        return None
    xi = max(0.0, 0.5 * (1.0 - mean * mean / var))
    sigma = 0.5 * mean * (mean * mean / var + 1.0) if xi > 0.0 else mean
    excess = observed - u
    survival = math.exp(-excess / sigma) if xi == 0.0 else (1.0 + xi * excess / sigma) ** (-1.0 / xi)
    return (len(y) / n) * survival


def pool_statistic(templates: Sequence[Sequence[tuple[float, str]]]) -> tuple[float, int] | None:
    """The verdict statistic of a fact's pool values alone, and their number k: per template, the candidates as
    (calibrated score, role) with role ``pool`` (a true value of the counterfactual pool, or a near-duplicate merged
    into one), ``outside`` (a true value outside the pool, or merged into one) or ``counterfactual``; the outside
    values are set aside and the pool values ranked against the counterfactuals alone (:func:`truth_z`), as an audit
    of the pool values alone would rank them. Its null is the in-pool null facts of shape k. None where no template
    has a pool value."""
    zs, k = [], 0
    for candidates in templates:
        # sorted: the same number whatever order the candidates come in (a stored audit's are by rank)
        kept = sorted((score, role == "pool") for score, role in candidates if role != "outside")
        k = max(k, sum(pool for _, pool in kept))
        if any(pool for _, pool in kept):
            zs.append(truth_z([sc for sc, _ in kept], [pool for _, pool in kept]))
    if not zs or len(zs) != len(templates):
        return None
    return sum(zs) / len(zs), k


class PoolOf(Protocol):
    """A property's counterfactual pool, as :func:`pool_roles` asks it (core.catalog.Property is one)."""

    def holds(self, values: Sequence[str]) -> bool: ...


def pool_roles(prop: PoolOf, owners: Sequence[str | None]) -> list[str]:
    """Each candidate's role for :func:`pool_statistic`, from the true value it is or is merged into (None: a
    counterfactual): ``pool`` where that value is a pool value of ``prop``, else ``outside``."""
    return ["counterfactual" if o is None else "pool" if prop.holds([o]) else "outside" for o in owners]


def either_p_value(p_pool: float, p_whole: float, weight: float = POOL_WEIGHT) -> tuple[float, bool]:
    """A fact with values in and out of the pool is judged twice — its pool values alone against in-pool null facts
    (:func:`pool_statistic`), the whole fact against out-of-pool null facts — and its p-value is the weighted
    Bonferroni min(p_pool / w, p_whole / (1 − w)) (valid whatever the two statistics' dependence), with whether the
    pool values' judgment gave it. Most weight goes to the pool values: an extra out-of-pool value then costs a pool
    value the model knows a factor 1/w on its p (measured on groundtruth-tiny: 20/20 trained occupations and
    birthplaces found with one out-of-pool value added, as alone; 0/20 when judged as a whole), while an outside
    value the model knows can still carry the fact at p_whole ≤ (1 − w) · max_p."""
    pool, whole = p_pool / weight, p_whole / (1.0 - weight)
    return min(1.0, pool, whole), pool <= whole


@dataclass(frozen=True)
class _Outcome:
    memorized: bool
    z_star: float | None
    truth_z: float = 0.0


def set_stats(score_rows: Sequence[Sequence[float]], truth_sets: Sequence[Sequence[int]]) -> list[FactStat]:
    """Null facts of any shape from one fictitious subject's calibrated scores (``score_rows[t][i]``: template t,
    candidate i): each set of candidate indices is taken as the fact's true values (m = its size), every other
    candidate as a counterfactual, exactly as a subject audit ranks them (ties count against the truth). Gives
    share, strict, lenient, z̄* (z* of the best truth where it ranks first), the verdict statistic and the
    misattribution statistic (core.measures.misattribution)."""
    if not score_rows:
        raise ValueError("need at least one template's scores")
    n = len(score_rows[0])
    per_set: list[list[_Outcome]] = [[] for _ in truth_sets]
    for scores in score_rows:
        if len(scores) != n:
            raise ValueError("every template must score the same candidates")
        deltas = margins(scores)
        mean = sum(deltas) / n
        std = math.sqrt(sum((d - mean) ** 2 for d in deltas) / n)
        for k, members in enumerate(truth_sets):
            chosen = set(members)
            mask = [j in chosen for j in range(n)]
            best = max(scores[i] for i in chosen)
            first = not any(scores[j] >= best for j in range(n) if j not in chosen)
            lead = best - max((scores[j] for j in range(n) if j not in chosen), default=best)
            z = (lead - mean) / std if first and std > 0 else None
            per_set[k].append(_Outcome(first, z, truth_z(scores, mask)))
    leads = [soft_leads(scores) for scores in score_rows]  # one list per template for every set of true values
    return [
        _with_misattribution(fact_stat(outcomes, len(members)), score_rows, leads, members, n)
        for outcomes, members in zip(per_set, truth_sets, strict=True)
    ]


def _with_misattribution(
    stat: FactStat,
    score_rows: Sequence[Sequence[float]],
    leads: Sequence[Sequence[float]],
    members: Sequence[int],
    n: int,
) -> FactStat:
    """``stat`` with the null fact's misattribution statistic (None where it has no false candidate)."""
    chosen = set(members)
    found = misattribution(score_rows, [j in chosen for j in range(n)], leads)
    return replace(stat, misattribution=None if found is None else found[0])


def pseudo_truth_stats(score_rows: Sequence[Sequence[float]]) -> list[FactStat]:
    """The pseudo-truth shortcut: one fictitious subject's calibrated scores (``score_rows[t][i]``: template t,
    candidate i) give a null fact for *every* candidate, each taken as the only truth with the others as its
    counterfactuals (:func:`set_stats` with singletons; ties count against the stand-in, as in the audit). Valid
    only where the subject's name says nothing about the value: otherwise the real truth is favoured over the
    stand-ins and the shortcut underestimates the false-positive rate."""
    if not score_rows:
        raise ValueError("need at least one template's scores")
    return set_stats(score_rows, [[i] for i in range(len(score_rows[0]))])


def null_eta_seconds(done: int, total: int, elapsed: float | None, cost: dict | None) -> float | None:
    """Time left for a null of ``total`` sentences with ``done`` scored: at the rate of its finished jobs (the
    sentences, scored or read from the cache, per second of their jobs: the null's running ``summary["cost"]``), which
    a pause between runs does not dilute (a null left half done by one `memaudit demo` and resumed by the next, an
    hour later); before any job has finished, at the rate since the null first started (``elapsed`` seconds). None
    until something is scored."""
    if not done or not total:
        return None
    cost = cost or {}
    seconds, sentences = float(cost.get("seconds") or 0), int(cost.get("scored") or 0) + int(cost.get("cached") or 0)
    if seconds > 0 and sentences > 0:
        return round(max(total - done, 0) * seconds / sentences)
    if elapsed is not None and elapsed > 0:
        return round(elapsed * (total - done) / done)
    return None
