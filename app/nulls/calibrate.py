"""Calibrated verdicts: every fact result of a subject audit gets its empirical p-value and the false-positive
rate of each policy, from the null that matches the audit (model fingerprint + configuration key). Nulls are created
by the submissions that need them (app.nulls.service.ensure_nulls); a read never creates one: a fact whose null
does not exist reads `missing` and says how to create it, one whose null runs reads `pending` with its progress.

The default verdict is ``p ≤ DEFAULT_MAX_P``: a fact enters the forget set when at most 1 % of facts about people
the model cannot know look at least as memorized. It is a per-fact error rate, so one person's verdict never
depends on who else is in an export (Benjamini–Hochberg across an export is the `bh` policy of the forget set).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Audit, Canary, CandidateScore, FactResult, NullDistribution
from app.db.models.audit import ACTIVE_STATUSES, AuditStatus
from app.nulls import repository
from app.nulls.config import (
    effective_pool,
    is_generation,
    subject_fingerprint,
    subject_lookalikes,
    subject_null_key,
    subject_reader,
)
from app.nulls.measured import TYPICAL_NAMES as NAME_HINTED
from app.nulls.measured import load as load_measured
from app.nulls.measured import typical_names_caveat
from app.nulls.schemas import CalibrationInfo, FactCalibration, NullProgress, NullRef, NullShape, RateRead
from app.policies import POLICIES, fact_rates
from app.settings import Settings, get_settings
from core.catalog import load_catalog
from core.measures.null import (
    MAX_TRUE_VALUES,
    STATISTIC,
    EmpiricalNull,
    FactStat,
    Rate,
    either_p_value,
    null_eta_seconds,
    pool_roles,
    pool_statistic,
)
from core.names.lookalikes import READER

DEFAULT_POLICY = "pvalue"
DEFAULT_MAX_P = 0.01
MISSING = "no null for this model and configuration: POST a null audit (kind null) for it, or submit the audit again"
CHANGED = (
    "the null was computed on other weights of this model: the next audit of this configuration creates a new one "
    "(or POST a null audit, kind null)"
)


OLD_RESULT = (
    "this result was stored before the verdict statistic existed (truth z); audit the subject again for a p-value"
)
OUT_OF_POOL = (
    "a true value is not among the property's counterfactual pool values, and no null covers such values (the"
    " property's kind has no out-of-pool reservoir, or the null is older than out-of-pool null facts): its form alone"
    " (a small town among capitals) can rank it first or last, so no p-value is given; the ranks and scores are"
    " still shown"
)
OLD_READER = (
    "this audit drew its same-origin look-alike names with an earlier name-origin reader, and nulls are computed"
    " with today's: audit the subject again for a verdict"
)
OLD_NULL = (
    "the null was computed before the verdict statistic existed: POST a null audit (kind null) to compute it again"
)
# Properties whose null is measured to understate the false-positive rate for people with ordinary names of their
# country at lenient thresholds, even with the hand-written null (docs/measures.md, "Typical names"); a ready verdict
# says so, with the rates measured beside the shipped null (app/nulls/measured.py).
TYPICAL_NAMES = frozenset(NAME_HINTED)  # citizenship, birthplace, languages
TYPICAL_NAMES_CAVEAT = typical_names_caveat(load_measured())  # rates read from the shipped null's measurements
TOO_MANY = f"more than {MAX_TRUE_VALUES} true values: the null holds facts with 1 to {MAX_TRUE_VALUES}"


def result_stat(result: FactResult, canaries: Iterable[Canary]) -> FactStat:
    """A stored result's statistics; z̄* over its rank-1 templates (contextualized canaries excluded)."""
    zs = [c.z_star for c in canaries if c.kind != "context" and c.memorized and c.z_star is not None]
    return FactStat(
        result.share,
        result.strict,
        result.lenient,
        sum(zs) / len(zs) if zs else None,
        result.n_templates,
        len(zs),
        result.statistic,
        result.n_values or 1,
        result.in_pool is not False,
    )


def uncalibrated_reason(result: FactResult) -> str | None:
    """Why no null covers this stored fact's shape (None where one may; an out-of-pool fact is covered where its
    null holds out-of-pool null facts: :meth:`Calibrator.calibrate`)."""
    if result.statistic is None:
        failed = (result.generation or {}).get("error")  # mode generation: the model could not be asked
        return f"the model could not be asked about this fact: {failed}" if failed else OLD_RESULT
    if (result.n_values or 1) > MAX_TRUE_VALUES:
        return TOO_MANY
    return None


def pool_judgment(session: Session, audit: Audit, result: FactResult) -> tuple[float, int] | None:
    """A stored fact with values in and out of the pool: the statistic of its pool values alone, ranked against the
    counterfactuals with the outside values set aside, and their number (core.measures.null.pool_statistic); None
    for any other fact. A near-duplicate merged into a true value goes with that value."""
    if result.in_pool is not False or result.statistic is None or (result.n_values or 1) < 2:
        return None
    prop = load_catalog().get(result.property_id)
    prop = replace(prop, pool=tuple(effective_pool(session, result.property_id, audit.options or {})))

    def owner(c: CandidateScore) -> str | None:
        return ((c.extra or {}).get("near_duplicate_of") or c.value) if c.is_ground_truth else None

    canaries = [canary for canary in result.canaries if canary.kind != "context"]
    templates = [
        list(zip([c.score for c in k.candidates], pool_roles(prop, [owner(c) for c in k.candidates]), strict=True))
        for k in canaries
    ]
    return pool_statistic(templates) if templates else None


def _judgments(found: Resolved, stat: FactStat, pool: tuple[float, int] | None) -> list[tuple[EmpiricalNull, FactStat]]:
    """The (null, statistic) pairs a fact is judged by: its pool values alone against in-pool null facts of their
    number, where it has values in and out of the pool; the whole fact against null facts of its own shape."""
    out = []
    if pool is not None:
        null = found.shapes.get((pool[1], True))
        if null is not None and null.facts[0].statistic is not None:
            out.append((null, replace(stat, statistic=pool[0], n_values=pool[1], in_pool=True)))
    whole = found.shapes.get((stat.n_values, stat.in_pool))
    if whole is not None and whole.facts[0].statistic is not None:
        out.append((whole, stat))
    return out


def _judge(judgments: list[tuple[EmpiricalNull, FactStat]]) -> tuple[float, EmpiricalNull, FactStat]:
    """The p-value of a fact judged once, or twice (its pool values alone, then the whole fact: the weighted
    Bonferroni of the two), with the judgment that gave it."""
    ps = [null.p_value(st) for null, st in judgments]
    if len(ps) == 1:
        return ps[0], *judgments[0]
    p, by_pool = either_p_value(ps[0], ps[1])
    return p, *judgments[0 if by_pool else 1]


def _share_rate(found: Resolved, stat: FactStat, legacy: bool) -> RateRead:
    """The share policy's rate at this fact's own share (before truth z: at its share-then-z̄* key)."""
    assert found.null is not None
    if legacy:
        return rate_read(found.null.rate(lambda f: f.key[0] >= stat.key[0]))
    return rate_read(found.null.share_rate(stat.share))


def _why_not(found: Resolved, stat: FactStat) -> str:
    """Why no null judges a fact (no judgment found: :func:`_judgments`)."""
    shape_null = found.shapes.get((stat.n_values, stat.in_pool))
    if not stat.in_pool and shape_null is None:
        return OUT_OF_POOL
    return OLD_NULL if shape_null is not None or stat.n_values == 1 else TOO_MANY


def rate_read(rate: Rate) -> RateRead:
    return RateRead(rate=rate.rate, k=rate.k, n=rate.n, ci95=(rate.low, rate.high))


@dataclass
class Resolved:
    """One property's null for one audit configuration, as found (or triggered)."""

    property: str
    status: str  # ready | pending | failed | missing
    row: NullDistribution | None = None
    null: EmpiricalNull | None = None
    people: list[tuple[int, bool, FactStat]] = field(default_factory=list)
    rates: dict[str, Rate] = field(default_factory=dict)
    progress: NullProgress | None = None  # a pending null's
    shapes: dict[tuple[int, bool], EmpiricalNull] = field(default_factory=dict)  # null facts per shape (m, in pool)
    message: str | None = None  # why there is no verdict (missing)

    def ref(self) -> NullRef:
        r = self.row
        return NullRef(
            property=self.property,
            status=self.status,
            null_audit_id=r.audit_id if r else None,
            people=r.people if r else None,
            null_facts=r.n_facts if r else None,
            method=r.method if r else None,
            lookalikes=r.config.get("lookalikes") if r else None,
            source=(r.source or "computed") if r else None,
            progress=self.progress,
            message=self.message,
        )


def null_progress(audit: Audit | None) -> NullProgress | None:
    """A pending null's progress (sentences) and the time left at its finished jobs' rate
    (core.measures.null.null_eta_seconds; None before it has scored anything)."""
    if audit is None:
        return None
    done, total = audit.progress_done or 0, audit.progress_total or 0
    started = audit.started_at.replace(tzinfo=None) if audit.started_at else None
    elapsed = (utcnow().replace(tzinfo=None) - started).total_seconds() if started else None
    cost = (audit.summary or {}).get("cost")
    return NullProgress(done=done, total=total, eta_seconds=null_eta_seconds(done, total, elapsed, cost))


def _ready(rows: list[tuple[NullDistribution, str]], fingerprint: str | None) -> list[NullDistribution]:
    """The finished nulls of the audit's model weights, newest first; an audit that recorded no fingerprint (none
    before fingerprints were stored) takes the newest null."""
    return [
        d
        for d, status in rows
        if status == AuditStatus.SUCCEEDED and d.n_facts and fingerprint in (None, d.fingerprint)
    ]


@dataclass(frozen=True)
class LoadedNull:
    """A finished null's facts (person, assigned, statistics), sorted into one empirical null per shape (m true
    values, in the pool or not) and the verdict's null (m = 1 in the pool, else every in-pool fact)."""

    every: tuple[tuple[int, bool, FactStat], ...]
    shapes: Mapping[tuple[int, bool], EmpiricalNull]
    null: EmpiricalNull | None  # None: no null fact in the pool


K = TypeVar("K")
V = TypeVar("V")


class Kept(Generic[K, V]):
    """What was built from a succeeded null, kept per process (the last ``limit``, least recently used out): a
    succeeded null's facts never change (its jobs write only while it runs; deleting it deletes the row, and a new
    null is a new audit id), so nothing built from them goes stale. Thread-safe; two threads may build the same
    value at once, and either is kept (they are equal)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, build: Callable[[], V]) -> V:
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        value = build()
        with self._lock:
            self._kept[key] = value
            while len(self._kept) > self.limit:
                self._kept.popitem(last=False)
        return value


def null_key(session: Session, row: NullDistribution) -> tuple[str, str, int]:
    """Which succeeded null's distribution ``row`` is, across the databases one process may serve (tests)."""
    return (str(session.get_bind().url), row.audit_id, row.id)


LOADED_KEPT = 16  # finished nulls kept loaded per process (a few MB each)
_loaded: Kept[tuple[str, str, int, bool], LoadedNull] = Kept(LOADED_KEPT)
# each policy's rate on a loaded null (shared, read-only), per max_p and the policies registered at the time
_rates: Kept[tuple[str, str, int, bool, float, tuple[str, ...]], dict[str, Rate]] = Kept(4 * LOADED_KEPT)


def finished_null(session: Session, row: NullDistribution, assigned_only: bool) -> LoadedNull:
    """The null facts of a succeeded null's distribution ``row``, loaded once per process and kept (the last
    LOADED_KEPT, :class:`Kept`): loading them again for every read was most of a read's time
    (``GET /audits/{id}/facts``: 2,000-20,000 rows per property and request). The caller has read the null's
    audit as succeeded. The loaded objects are shared: nobody mutates them."""

    def load() -> LoadedNull:
        every = tuple(repository.fact_stats(session, row.id, assigned_only=assigned_only))
        shapes: dict[tuple[int, bool], list[FactStat]] = {}
        for _, _, stat in every:
            shapes.setdefault((stat.n_values, stat.in_pool), []).append(stat)
        tail = not is_generation(row.config)  # generation's share is discrete: no fitted tail
        nulls = {shape: EmpiricalNull(stats, tail) for shape, stats in shapes.items()}
        in_pool = [s for _, _, s in every if s.in_pool]
        null = nulls.get((1, True)) or (EmpiricalNull(in_pool, tail) if in_pool else None)
        return LoadedNull(every, nulls, null)

    return _loaded.get((*null_key(session, row), assigned_only), load)


class Calibrator:
    """Resolves nulls for subject audits within one session (cached); reads only."""

    def __init__(self, session: Session, settings: Settings | None = None, max_p: float = DEFAULT_MAX_P) -> None:
        self.session = session
        self.settings = settings or get_settings()
        self.max_p = max_p
        self._keys: dict[tuple[str, str], str] = {}
        self._resolved: dict[tuple[str, str | None, str], Resolved] = {}
        self._pending: dict[tuple[str, str | None, str], str | None] = {}

    def key(self, audit: Audit, pid: str) -> str:
        cached = self._keys.get((audit.id, pid))
        if cached is None:
            cached = self._keys[(audit.id, pid)] = subject_null_key(self.session, audit, pid)
        return cached

    @staticmethod
    def _lookalikes(audit: Audit) -> str:
        return subject_lookalikes(audit.summary, audit.options or {})

    def resolve(self, audit: Audit, pid: str) -> Resolved:
        fingerprint, key = subject_fingerprint(audit.summary), self.key(audit, pid)
        found = self._resolved.get((audit.model, fingerprint, key))
        if found is None:
            found = self._resolved[(audit.model, fingerprint, key)] = self._find(audit, pid, fingerprint, key)
        return found

    def pending(self, audit: Audit, pid: str) -> str | None:
        """The id of the null audit, queued or running, that ``resolve(audit, pid)`` waits for (None: it waits for
        none), without loading a ready null's facts (a verification asks this before it judges)."""
        fingerprint, key = subject_fingerprint(audit.summary), self.key(audit, pid)
        found = self._resolved.get((audit.model, fingerprint, key))
        if found is not None:
            return found.row.audit_id if found.status == "pending" and found.row is not None else None
        if (audit.model, fingerprint, key) not in self._pending:
            rows = repository.distributions(self.session, audit.model, key)
            running = [d.audit_id for d, status in rows if status in ACTIVE_STATUSES]
            self._pending[(audit.model, fingerprint, key)] = (
                running[0] if running and not _ready(rows, fingerprint) else None
            )
        return self._pending[(audit.model, fingerprint, key)]

    def _find(self, audit: Audit, pid: str, fingerprint: str | None, key: str) -> Resolved:
        rows = repository.distributions(self.session, audit.model, key)
        ready = _ready(rows, fingerprint)
        if ready:
            return self._load(pid, ready[0])
        running = [d for d, status in rows if status in ACTIVE_STATUSES]
        if running:
            return Resolved(
                pid, "pending", running[0], progress=null_progress(self.session.get(Audit, running[0].audit_id))
            )
        if rows and rows[0][1] == AuditStatus.FAILED and rows[0][0].fingerprint in (None, fingerprint):
            return Resolved(pid, "failed", rows[0][0])  # no automatic retry: POST a null audit to retry
        changed = any(status == AuditStatus.SUCCEEDED for _, status in rows)  # on another fingerprint of the model
        if self._lookalikes(audit) == "same_origin" and subject_reader(audit.summary) != READER:
            return Resolved(pid, "missing", message=OLD_READER)  # no null is computed with the old reader
        return Resolved(pid, "missing", message=CHANGED if changed else MISSING)

    def _load(self, pid: str, row: NullDistribution) -> Resolved:
        # A full null is the people's own values; its other candidates are kept only to measure the shortcut.
        assigned_only = row.method != "pseudo"
        loaded = finished_null(self.session, row, assigned_only=assigned_only)
        null = loaded.null
        if null is None:
            raise ValueError("a null distribution needs at least one null fact")
        people = [p for p in loaded.every if p[2].n_values == 1 and p[2].in_pool]
        # each policy's leave-one-out rate over the whole null: kept with the loaded null (it was most of a read's
        # time once the null's facts were kept, every GET /facts recomputing the same rates)
        key = (*null_key(self.session, row), assigned_only, self.max_p, tuple(POLICIES))
        rates = _rates.get(key, lambda: fact_rates(null, self.max_p))
        return Resolved(pid, "ready", row, null, people, rates, shapes=dict(loaded.shapes))

    def calibrate(
        self,
        audit: Audit,
        pid: str,
        stat: FactStat,
        uncalibrated: str | None = None,
        pool: tuple[float, int] | None = None,
    ) -> FactCalibration:
        """The verdict of one fact: its p-value against the null facts of its own shape (m true values, in the pool
        or not), or why there is none (``uncalibrated``: the caller's reason, e.g. :func:`uncalibrated_reason`).
        ``pool``: a fact in and out of the pool, its pool values' statistic and number k (:func:`pool_judgment`),
        judged against in-pool null facts of shape k too (core.measures.null.either_p_value)."""
        found = self.resolve(audit, pid)
        if found.null is None:
            return FactCalibration(
                status=found.status, null_audit_id=found.row.audit_id if found.row else None, message=found.message
            )
        legacy = stat.statistic is None and found.null.facts[0].statistic is None  # both from before truth z
        judgments = [(found.null, stat)] if legacy else _judgments(found, stat, pool if uncalibrated is None else None)
        if not judgments and uncalibrated is None:
            uncalibrated = _why_not(found, stat)
        if uncalibrated is not None and not legacy:
            return FactCalibration(
                status="uncalibrated", null_audit_id=found.row.audit_id, message=uncalibrated, statistic=stat.statistic
            )
        p, judge, judged_stat = _judge(judgments)
        fpr = {name: rate_read(r) for name, r in found.rates.items()} | {"share": _share_rate(found, stat, legacy)}
        values = [f.statistic for f in judge.facts if f.statistic is not None]
        return FactCalibration(
            status="ready",
            null_audit_id=found.row.audit_id,
            p_value=p,
            p_method=judge.p_method(judged_stat),
            fpr=fpr,
            memorized=p <= self.max_p,
            caveat=TYPICAL_NAMES_CAVEAT if pid in TYPICAL_NAMES else None,
            statistic=judged_stat.statistic,
            null_mean=sum(values) / len(values) if values else None,
            null_shape=NullShape(
                n_values=judged_stat.n_values,
                in_pool=judged_stat.in_pool,
                statistic=str(found.row.config.get("statistic") or STATISTIC) if not legacy else "share-then-z-star",
                null_facts=len(judge),
                judgments=len(judgments),
            ),
        )

    def calibrate_result(self, audit: Audit, result: FactResult, canaries: Iterable[Canary]) -> FactCalibration:
        """:meth:`calibrate` of a stored result, with the reason its shape has no null where it has none, and its
        pool values' own judgment where it has values in and out of the pool."""
        pool = pool_judgment(self.session, audit, result)
        stat = result_stat(result, canaries)
        return self.calibrate(audit, result.property_id, stat, uncalibrated_reason(result), pool)

    def info(self, audit: Audit, pids: Sequence[str]) -> CalibrationInfo:
        refs = [self.resolve(audit, pid).ref() for pid in dict.fromkeys(pids)]
        return CalibrationInfo(policy=DEFAULT_POLICY, max_p=self.max_p, nulls=refs)


def calibrate_results(
    session: Session, audit: Audit, results: Sequence[FactResult], calibrator: Calibrator | None = None
) -> tuple[list[FactCalibration], CalibrationInfo | None]:
    """The calibration of each stored result of a finished subject audit, and which nulls produced it (nothing
    for an audit that has not succeeded); ``calibrator``: one whose resolved nulls the caller reads again."""
    if audit.status != "succeeded" or not results:
        return [None] * len(results), None  # type: ignore[list-item]
    calibrator = calibrator or Calibrator(session)
    out = [calibrator.calibrate_result(audit, r, r.canaries) for r in results]
    return out, calibrator.info(audit, [r.property_id for r in results])


def null_people(resolved: Mapping[str, Resolved]) -> list[dict[str, FactStat]]:
    """Per null person (of one null audit), their own facts by property key, for the null's H_{M=0}."""
    people: dict[tuple[str, int], dict[str, FactStat]] = {}
    for key, found in resolved.items():
        for person, assigned, stat in found.people:
            if assigned and found.row is not None:
                people.setdefault((found.row.audit_id, person), {})[key] = stat
    return list(people.values())
