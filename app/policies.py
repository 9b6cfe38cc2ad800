"""The forget set's policies: which facts an export holds, and what each record says of why.

One :class:`Policy` per policy, listed in :data:`POLICIES`, the one place a policy is added. Everything else reads
the registry: GET /forget-set (its ``policy`` enum and description, and which parameters a policy needs), the
dashboard's forget-set form, ``memaudit export --policy`` (choices and help), the export's prefilter
(app/forget_set/repository.py), its selection, record label and false-positive rate (app/forget_set/verdicts.py),
and the places that name the default (``DEFAULT``) or the policy that needs no null (``NO_NULL``).

Adding a policy: write its ``Policy(...)`` here and list it in ``POLICIES``. A policy that reads a new query
parameter also adds that parameter to ``ForgetFilters`` (below) and the route. tests/support/toy_policy.py is a whole
policy written outside this file and registered in a test (``with POLICIES.registered(TOY): ...``).

This module imports no web, database or numeric library (``memaudit export --help`` reads it): SQL conditions are
built on the ``FactResult`` class the repository hands in, p-value helpers are imported when a policy runs.
It is a shared layer at the top of app/ (like app/queue.py), not part of the forget-set package: the
calibration (app/nulls/calibrate.py, each fact's ``calibration.fpr``) and the null job read it too, and it imports
no feature package.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.errors import InvalidInput

if TYPE_CHECKING:
    from core.measures.null import EmpiricalNull, Rate

# (the FactResult class, the filters) -> a SQL condition on the fact's stored result
Prefilter = Callable[[Any, "ForgetFilters"], Any]
# (the filters, the p-values of every fact in scope, computed when called) -> the p-value threshold of the export
Threshold = Callable[["ForgetFilters", Callable[[], list[float]]], float]
# (the matching null, the filters, the export's threshold) -> the policy's false-positive rate on that null
NullRate = Callable[["EmpiricalNull", "ForgetFilters", float], "Rate"]
# (the filters, the export's threshold) -> what every record says its policy was
Label = Callable[["ForgetFilters", float], str]


def retrieved(result: Any, _: ForgetFilters) -> Any:
    """WikiMem's readings' floor: some template ranks a true value first (lenient)."""
    return result.lenient.is_(True)


@dataclass(frozen=True)
class Policy:
    """One forget-set policy, described once.

    ``description`` is one clause, said in the API's documentation, the CLI's help and the dashboard's form;
    ``control`` what error it bounds (or that it bounds none). ``needs`` lists the query parameters it cannot do
    without, each with the values it takes (refused with a 422 naming the parameter when missing). ``prefilter``
    selects the stored results it may keep (in SQL); a policy with a ``threshold`` then keeps the facts whose p-value
    against the matching null is at most that threshold (a fact without a p-value, its null pending, is left out and
    counted); one without keeps every prefiltered fact. ``rate`` is its false-positive rate on the matching null,
    and ``label`` what every record says its policy was."""

    name: str
    description: str
    control: str
    rate: NullRate
    prefilter: Prefilter = retrieved
    threshold: Threshold | None = None
    label: Label | None = None
    needs: tuple[tuple[str, str], ...] = ()
    export_wide: bool = False  # its threshold is computed across the export (bh): no per-fact rate

    @property
    def p_values(self) -> bool:
        """Selects by p-value: needs the null, leaves out (and counts) the facts whose null is not ready."""
        return self.threshold is not None

    def said(self, filters: ForgetFilters, threshold: float) -> str:
        return self.label(filters, threshold) if self.label else self.name

    def missing(self, given: Mapping[str, Any]) -> tuple[str, str] | None:
        """The first parameter this policy needs that ``given`` lacks (or holds as None), with its values."""
        return next(((name, hint) for name, hint in self.needs if given.get(name) is None), None)

    def check(self, given: Mapping[str, Any]) -> None:
        """Refuses (422, naming the parameter) a request that lacks a parameter this policy needs."""
        lack = self.missing(given)
        if lack is not None:
            raise InvalidInput(lack[0], f"policy={self.name} needs {lack[0]} ({lack[1]})")


class PolicyRegistry(Mapping[str, Policy]):
    """The policies the service offers, by name, in the order the API documents them; the first is the default."""

    def __init__(self, policies: list[Policy]) -> None:
        self._policies: dict[str, Policy] = {}
        for policy in policies:
            if policy.name in self._policies:
                raise ValueError(f"forget-set policy {policy.name!r} is registered twice")
            self._policies[policy.name] = policy

    def __getitem__(self, name: str) -> Policy:
        return self._policies[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._policies)

    def __len__(self) -> int:
        return len(self._policies)

    def named(self, name: str) -> Policy:
        """The policy called ``name``, or a 422 naming the ``policy`` parameter (never echoing the value)."""
        if name not in self._policies:
            raise InvalidInput("policy", f"policy must be one of {', '.join(self._policies)}")
        return self._policies[name]

    def described(self) -> str:
        """Every policy in one sentence per policy, the default said first (the API's and the CLI's help)."""
        return "; ".join(
            f"{p.name}{' (default)' if i == 0 else ''}: {p.description} — {p.control}"
            for i, p in enumerate(self._policies.values())
        )

    @contextmanager
    def registered(self, policy: Policy) -> Iterator[Policy]:
        """This registry with one more policy (a plug-in, or a test's toy policy) until the block ends. Everything
        that reads the registry while the block runs sees it: an app created inside the block, the CLI's parser."""
        if policy.name in self._policies:
            raise ValueError(f"forget-set policy {policy.name!r} is registered twice")
        self._policies[policy.name] = policy
        try:
            yield policy
        finally:
            del self._policies[policy.name]


def judged(result: Any, _: ForgetFilters) -> Any:
    """The p-value policies' floor: every fact with a verdict statistic (the statistic uses every rank, so a fact no
    template ranks first may still be flagged, and a flagged fact is exported), and results from before it that
    some template ranks first (their p-value is the share's)."""
    return result.statistic.is_not(None) | result.lenient.is_(True)


def _pvalue_rate(null: EmpiricalNull, _: ForgetFilters, threshold: float) -> Rate:
    return null.pvalue_rate(threshold)


def _bh_threshold(f: ForgetFilters, p_values: Callable[[], list[float]]) -> float:
    from core.measures.null import benjamini_hochberg

    every = p_values()  # m = every fact in scope; a fact whose null is pending counts with p = 1
    return benjamini_hochberg(every, f.q) if every else 0.0


def _share_prefilter(result: Any, f: ForgetFilters) -> Any:
    return result.share >= f.min_share if f.min_share is not None else retrieved(result, f)


def _share_rate(null: EmpiricalNull, f: ForgetFilters, _: float) -> Rate:
    if f.min_share is None:
        return null.rate(lambda s: s.lenient)
    return null.rate(lambda s: s.share >= f.min_share - 1e-9)


NO_CONTROL = "WikiMem's reading, no error control"

PVALUE = Policy(
    name="pvalue",
    description="p <= max_p against the matching null (fictitious people audited alike)",
    control="a per-fact error rate (a person's entry never depends on who else is exported)",
    rate=_pvalue_rate,
    prefilter=judged,
    threshold=lambda f, _: f.max_p,
    label=lambda f, _: f"pvalue<={f.max_p:g}",
)
BH = Policy(
    name="bh",
    description="Benjamini-Hochberg at false discovery rate q across this export",
    control="an error rate across the export",
    rate=_pvalue_rate,
    prefilter=judged,
    threshold=_bh_threshold,
    label=lambda f, threshold: f"bh(q={f.q:g}): p<={threshold:.4g}",
    export_wide=True,
)
LENIENT = Policy(
    name="lenient",
    description="retrievable by some template",
    control=NO_CONTROL,
    rate=lambda null, f, _: null.rate(lambda s: s.lenient),
)
STRICT = Policy(
    name="strict",
    description="retrievable by every template",
    control=NO_CONTROL,
    rate=lambda null, f, _: null.rate(lambda s: s.strict),
    prefilter=lambda result, _: result.strict.is_(True),
)
SHARE = Policy(
    name="share",
    description="retrievable by at least min_share of templates",
    control=NO_CONTROL,
    rate=_share_rate,
    prefilter=_share_prefilter,
    label=lambda f, _: f"share>={f.min_share:g}" if f.min_share is not None else "lenient",
    needs=(("min_share", "0 to 1"),),
)

POLICIES = PolicyRegistry([PVALUE, BH, LENIENT, STRICT, SHARE])


def fact_rates(null: EmpiricalNull, max_p: float) -> dict[str, Rate]:
    """Each registered policy's false-positive rate on ``null`` where one fact's selection does not depend on the
    export (no threshold computed across it) nor on a parameter the policy needs: what every calibrated fact
    reports (``calibration.fpr``) and a null's summary stores. A policy registered here gets its entry with no
    other edit; ``bh`` (its threshold is the export's) and ``share`` (its ``min_share``; a fact reports the rate
    at its own share) are left out."""
    filters = ForgetFilters(max_p=max_p)
    rates = {}
    for policy in POLICIES.values():
        if not policy.needs and not policy.export_wide:
            threshold = policy.threshold(filters, list) if policy.threshold else max_p
            rates[policy.name] = policy.rate(null, filters, threshold)
    return rates


DEFAULT = PVALUE.name  # the API's default, and the demo's forget set where every fact has its p-value
NO_NULL = LENIENT.name  # exports facts whose null is not ready (uncalibrated): what a pending export points to


@dataclass(frozen=True)
class ForgetFilters:
    """What an export asks for (GET /forget-set's query, the CLI's and the dashboard's): its scope, and the
    parameters its policy reads."""

    model: str | None = None
    subject_id: int | None = None
    audit_id: str | None = None
    property: str | None = None
    policy: str = DEFAULT  # a name in POLICIES
    min_share: float | None = None
    min_z: float | None = None
    max_p: float = 0.01  # policy pvalue: p <= max_p against the matching null
    q: float = 0.05  # policy bh: Benjamini–Hochberg false discovery rate across the export
    batch_id: str | None = None  # the audits of one batch (app/batches)
    all_audits: bool = False  # every audit's facts; else the newest audit's per (subject, model, property)
