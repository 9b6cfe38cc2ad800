"""Null audit job: audit K fictitious people whose names fit their facts, exactly as a subject audit would (same
templates, counterfactual count and pool, α, look-alike scheme, near-duplicate rule), and store the statistics of
every null fact per property.

Full method: a person's own value is the truth, one null fact per person. Pseudo-truth method (properties the name
says nothing about): the same scoring, then every candidate stands in as the truth, one null fact per candidate.
Out-of-pool null facts (``in_pool`` false): where the property's kind has a reservoir (core.names.out_of_pool), each
person also has true values outside the pool (one for a full null, a town of their name's origin for places; several
for a pseudo null), each ranked against the person's same counterfactuals — so they cost only their own sentences.

A null runs as small jobs: each audits the next (person, property) pairs not yet stored, about
``null_job_sentences`` sentences' worth, stores their null facts in one transaction, and hands its audit on to a
next job at the tail of its lane (``NextStep``); the job that finds every pair stored writes the summary. So a
worker is never held long, a single audit waits for at most one such job, and a run that dies resumes from what is
stored. Scored sentences go through the NLL cache like any audit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from sqlalchemy import delete, insert, select

from app.db.engine import session_scope
from app.db.models import Audit, NullDistribution, NullFact
from app.nulls.config import effective_pool, is_generation, out_of_pool_per_person, pool_hash, sentences_per_person
from app.policies import fact_rates
from app.settings import get_settings
from app.subjects.schemas import SubjectAuditOptions
from core.catalog import counterfactuals, load_catalog
from core.measures.answers import Reading
from core.measures.null import MAX_TRUE_VALUES, EmpiricalNull, FactStat, set_stats
from core.measures.wikimem import calibrated_scores, generic_cancels, generic_subject
from core.names.fictitious import FictitiousPerson, cohort
from core.names.lookalikes import lookalike_names
from core.names.out_of_pool import out_of_pool_values
from workers.jobs import asking
from workers.jobs.common import JobContext, JobError, NextStep, run_audit_job
from workers.jobs.scoring import CanaryPlan, PropertyPlan, relax_near_duplicates, score_all, sentence_pairs
from workers.lm.base import Scorer
from workers.lm.generation import get_generator

T = TypeVar("T")
ERASED = "this null audit's rows were deleted while it ran; nothing was stored: submit the null audit again"
POOL_CHANGED = (
    "the counterfactual pool of {pid} changed after this null was submitted (a dump import?): its people would be"
    " scored against two pools under one key; submit the null audit again"
)
MAX_P_REPORTED = 0.01  # the summary reports the FPR of the default policy p <= 0.01


def run(audit_id: str) -> None:
    # one job per few people; each stored step sends the next job to the tail of the lane (module docstring)
    run_audit_job(audit_id, "null", SubjectAuditOptions, _audit)


@dataclass
class Spec:
    distribution_id: int
    pid: str
    config: dict[str, Any]
    people: int
    pool: tuple[str, ...]


@dataclass
class NullPlan:
    spec: Spec
    person: FictitiousPerson
    plan: PropertyPlan
    outside: list[PropertyPlan] = field(default_factory=list)  # out-of-pool truths, the same counterfactuals

    @property
    def plans(self) -> list[PropertyPlan]:
        return [self.plan, *self.outside]


class _Progress:
    """The null's progress in sentences over every job: score_all reports this job's distinct sentences; they
    count for this job's share of the whole (``step``) after what earlier jobs stored (``offset``)."""

    def __init__(self, ctx: JobContext, offset: int, step: int, total: int) -> None:
        self.ctx, self.model, self.offset, self.step, self.total = ctx, ctx.model, offset, step, total

    def progress(self, done: int, total: int, *, force: bool = False) -> None:
        share = self.step * done // total if total else 0
        self.ctx.progress(min(self.offset + share, self.total), self.total, force=force)

    def scorer(self) -> Scorer:
        return self.ctx.scorer()


def _specs(ctx: JobContext[SubjectAuditOptions]) -> list[Spec]:
    """The null's properties (one distribution each) and the configuration each must match."""
    with session_scope() as s:
        rows = list(s.scalars(select(NullDistribution).where(NullDistribution.audit_id == ctx.audit_id)))
        if not rows:
            raise JobError("this null audit has no properties to calibrate")
        catalog = load_catalog()
        specs = []
        for row in rows:
            pool = effective_pool(s, row.property_id, ctx.options.model_dump(mode="json"))
            if "pool_hash" in row.config and pool_hash(pool) != row.config["pool_hash"]:
                raise JobError(POOL_CHANGED.format(pid=row.property_id))  # the pool the key was promised
            prop_pool = tuple(pool) if pool else catalog.get(row.property_id).pool
            specs.append(Spec(row.id, row.property_id, dict(row.config), int(row.people or 0), prop_pool))
    return specs


def _plan(spec: Spec, person: FictitiousPerson, seed: int) -> PropertyPlan:
    config = spec.config
    prop = replace(load_catalog().get(spec.pid), pool=spec.pool)
    truth = person.facts[spec.pid]
    # Each person draws its own counterfactuals (seeded by the cohort seed and the person).
    drawn = counterfactuals(prop, [truth], int(config["counterfactuals"]), seed * 1_000_003 + person.index + 1)
    plan = PropertyPlan(prop, [], [truth], drawn)
    similar, _ = lookalike_names(person.name, int(config["similar_names"]), str(config["lookalikes"]))
    with_generic = not generic_cancels(float(config["alpha"]), len(similar))  # at α = 1 NLL(h0, v) cancels: unscored
    for idx, template in enumerate(config["templates"]):
        kind = "baseline" if idx == 0 else "paraphrase"
        plan.canaries.append(CanaryPlan(idx, template, kind, generic_subject(template), similar, with_generic))
    return plan


def _outside(spec: Spec, person: FictitiousPerson, seed: int, plan: PropertyPlan) -> list[PropertyPlan]:
    """The person's out-of-pool truths, each a plan of its own with the in-pool plan's counterfactuals and canaries
    (a subject audit of that truth would draw its counterfactuals from the whole pool: these lack only the person's
    own pool value, which fits the name, so the out-of-pool truth's margin is if anything larger — conservative)."""
    prop = plan.prop
    k = out_of_pool_per_person(spec.config)
    values = out_of_pool_values(prop, person.locale, f"{seed}:{person.index}:{spec.pid}", k)
    return [PropertyPlan(prop, [], [v], list(plan.counterfactuals), plan.canaries) for v in values]


def _score_rows(
    item: NullPlan, nll: dict[str, float], plan: PropertyPlan | None = None
) -> Iterator[list[list[float] | None]]:
    """Per template: NLL rows for [subject, generic (None where it cancels), *look-alikes] x candidates of ``plan``
    (the in-pool plan by default)."""
    plan = plan or item.plan
    for canary in plan.canaries:
        rows: list[list[float] | None] = [
            [nll[a + b] for a, b in variant] for variant in sentence_pairs(plan, canary, item.person.name)
        ]
        if not canary.score_generic:
            rows.insert(1, None)
        yield rows


def _own_sets(plan: PropertyPlan) -> list[list[int]]:
    """The audit's own truth mask (near-duplicates merged into the truth), then the shapes m > 1: the first m − 1
    other counterfactuals added to the truths."""
    own = [i for i, t in enumerate(plan.truth_mask) if t]
    others = [i for i, t in enumerate(plan.truth_mask) if not t]
    sets = [own + others[: m - len(own)] for m in range(len(own), MAX_TRUE_VALUES + 1) if m - len(own) < len(others)]
    return sets or [own]


def _outside_stats(item: NullPlan, nll: dict[str, float]) -> list[tuple[str, bool, FactStat]]:
    """The out-of-pool null facts of one person (``in_pool`` false), every shape m: the out-of-pool truth with the
    first m − 1 counterfactuals (one value of a real fact outside the pool, the others in it)."""
    alpha = float(item.spec.config["alpha"])
    out = []
    for plan in item.outside:
        scores = [calibrated_scores(r[0], r[1], r[2:], alpha) for r in _score_rows(item, nll, plan)]
        out += [(plan.ground_truths[0], True, replace(st, in_pool=False)) for st in set_stats(scores, _own_sets(plan))]
    return out


def _stats(item: NullPlan, nll: dict[str, float]) -> list[tuple[str, bool, FactStat]]:
    """(value, assigned, statistics) of one person's null facts for one property, in every shape a subject's fact
    may have (m = 1 .. MAX_TRUE_VALUES true values: ``FactStat.n_values``).

    Full null: the person's own value (with the near-duplicates the audit's rule merges into it) is the truth
    (assigned); the shapes m > 1 add the first m − 1 other counterfactuals to the truths (the person's own value
    stays among them, so what the name implies is in every shape). Then every candidate alone, and disjoint sets of
    m candidates, stand in as pseudo-truths: a pseudo null uses them all; a full null keeps them to measure what the
    shortcut would have estimated (they cost no extra scoring)."""
    alpha = float(item.spec.config["alpha"])
    scores = [calibrated_scores(r[0], r[1], r[2:], alpha) for r in _score_rows(item, nll)]
    values = item.plan.candidates
    out: list[tuple[str, bool, FactStat]] = []
    if item.spec.config["method"] == "full":  # the audit's own truth mask (near-duplicates merged into the truth)
        out += [(values[0], True, st) for st in set_stats(scores, _own_sets(item.plan))]
    for m in range(1, MAX_TRUE_VALUES + 1):
        groups = [list(range(i, i + m)) for i in range(0, len(values) - m + 1, m)]
        out += [
            (values[g[0]], g[0] == 0 and item.spec.config["method"] != "full", st)
            for g, st in zip(groups, set_stats(scores, groups), strict=True)
        ]
    return out + _outside_stats(item, nll)


def _relax(items: list[NullPlan]) -> None:
    """The subject job's near-duplicate rule, on full null facts (pseudo-truths ignore merges: see resolve_method)
    and on every out-of-pool truth (a subject's out-of-pool truth is merged with its near-duplicates)."""
    with_rule = [i for i in items if i.spec.config["near_duplicates"]]
    for (threshold, scope), group in _by_rule(with_rule).items():
        plans = [p for i in group for p in (i.plans if i.spec.config["method"] == "full" else i.outside)]
        if plans:
            relax_near_duplicates(plans, threshold, scope)


def _by_rule(items: list[NullPlan]) -> dict[tuple[float, str], list[NullPlan]]:
    out: dict[tuple[float, str], list[NullPlan]] = {}
    for i in items:
        rule = (float(i.spec.config["near_duplicate_threshold"]), str(i.spec.config["near_duplicate_scope"]))
        out.setdefault(rule, []).append(i)
    return out


def _audit(ctx: JobContext[SubjectAuditOptions]) -> dict[str, Any]:
    """One job: the next people not yet stored (raises NextStep once they are stored and others remain), or the
    summary when every person of every property is stored."""
    specs = _specs(ctx)
    seed = ctx.options.seed
    stored = _stored(specs)
    left = [
        (i, s)
        for i in range(max(s.people for s in specs))
        for s in specs
        if i < s.people and i not in stored[s.distribution_id]
    ]
    if not left:
        return _summarize(ctx.audit_id, specs)
    take = _next_people(left, get_settings().null_job_sentences)
    people = cohort(max(i for i, _ in take) + 1, [s.pid for s in specs], load_catalog(), seed)  # a prefix: the same
    items = [NullPlan(s, people[i], _plan(s, people[i], seed)) for i, s in take]
    for item in items:
        item.outside = _outside(item.spec, item.person, seed, item.plan)
    asked = is_generation(specs[0].config)  # every property of a null is asked the same way
    get_generator(ctx.model) if asked else ctx.scorer()  # loaded before the clock starts: cost excludes loading
    offset = sum(len(stored[s.distribution_id]) * _per_person(s) for s in specs)
    step = sum(_per_person(i.spec) for i in items)
    progress = _Progress(ctx, offset, step, sum(s.people * _per_person(s) for s in specs))
    started = time.monotonic()
    _relax(items)
    facts: dict[int, list[dict[str, Any]]] = {s.distribution_id: [] for s in specs}
    found, stats = _ask_items(ctx, progress, items, seed) if asked else _score_people(progress, items)
    for item, rows in zip(items, found, strict=True):
        facts[item.spec.distribution_id] += [_row(item, value, assigned, st) for value, assigned, st in rows]
    cost = {"seconds": time.monotonic() - started, "scored": stats["scored"], "cached": stats["cached"], "jobs": 1}
    _store(ctx.audit_id, specs, facts, stats["fingerprint"], cost)
    progress.offset, progress.step = offset + step, 0
    progress.progress(0, 0, force=True)
    if len(left) > len(take):
        raise NextStep
    return _summarize(ctx.audit_id, specs)


Found = list[list[tuple[str, bool, FactStat]]]  # per item: (value, assigned, statistics) of its null facts


def _score_people(progress: _Progress, items: list[NullPlan]) -> tuple[Found, dict[str, Any]]:
    """Mode scoring: every item's null facts from its scored sentences."""
    nll, stats = _score_items(progress, items)
    return [_stats(item, nll) for item in items], stats


def _ask_items(ctx: JobContext, progress: _Progress, items: list[NullPlan], seed: int) -> tuple[Found, dict[str, Any]]:
    """Mode generation: ask the model about every item's person as a subject audit asks (workers/jobs/asking.py),
    and read the answers into null facts of every shape (:func:`_asked_stats`)."""
    generator = get_generator(ctx.model)
    gen = ctx.options.generation
    groups = [asking.prompts_for(item.plan, item.person.name, gen) for item in items]
    before = generator.usage.samples
    asking.ask(generator, groups, gen, seed, progress.progress)
    read = [asking.read(i.plan, asked, asking.vocabulary(i.plans)) for i, asked in zip(items, groups, strict=True)]
    near = _near(items, read)
    found = [_asked_stats(item, r, n) for item, r, n in zip(items, read, near, strict=True)]
    sampled = generator.usage.samples - before
    return found, {"scored": sampled, "cached": 0, "fingerprint": generator.fingerprint}


def _near(items: list[NullPlan], read: list[list[list[Reading]]]) -> list[list[frozenset[str]]]:
    """Per item, per plan (in-pool, then out-of-pool): the values said that the near-duplicate rule merges into its
    truth (asking.near_truths), where :func:`_relax` applies the rule (a pseudo null: the out-of-pool truths only)."""
    asked = []
    for item, readings in zip(items, read, strict=True):
        c = item.spec.config
        rule = (float(c["near_duplicate_threshold"]), str(c["near_duplicate_scope"])) if c["near_duplicates"] else None
        full = c["method"] == "full"
        asked += [(p, readings, rule if full or k else None) for k, p in enumerate(item.plans)]
    flat = iter(asking.near_truths(asked))
    return [[next(flat) for _ in item.plans] for item in items]


def _asked_stats(
    item: NullPlan, readings: list[list[Reading]], near: list[frozenset[str]]
) -> list[tuple[str, bool, FactStat]]:
    """One person's null facts from their answers, in the shapes :func:`_stats` gives in mode scoring: the person's
    own value (full null) with the first m − 1 other counterfactuals, every disjoint set of m candidates (pseudo
    null), and each out-of-pool truth with the first m − 1 counterfactuals (``in_pool`` false). Each carries the
    misattribution statistic: near-truths (``near``, per plan) excluded where the truth is the person's own."""
    plan, full = item.plan, item.spec.config["method"] == "full"
    tie = ("null", item.person.index, item.spec.pid)

    def stat(p: PropertyPlan, members: list[int], in_pool: bool, said: frozenset[str] = frozenset()) -> FactStat:
        return asking.fact_stat(p, readings, members, in_pool, *tie, *asking.truth_values(p, members), near=said)

    out = [(plan.candidates[0], True, stat(plan, m, True, near[0])) for m in (_own_sets(plan) if full else [])]
    for m in range(1, MAX_TRUE_VALUES + 1):
        groups = [list(range(i, i + m)) for i in range(0, len(plan.candidates) - m + 1, m)]
        out += [(plan.candidates[g[0]], g[0] == 0 and not full, stat(plan, g, True)) for g in groups]
    for p, said in zip(item.outside, near[1:], strict=True):
        out += [(p.ground_truths[0], True, stat(p, m, False, said)) for m in _own_sets(p)]
    return out


def _next_people(left: list[tuple[int, Spec]], budget: int) -> list[tuple[int, Spec]]:
    """This job's (person, property) pairs: whole pairs, about ``budget`` sentences' worth, at least one."""
    take: list[tuple[int, Spec]] = []
    for i, s in left:
        if take and sum(_per_person(t) for _, t in take) + _per_person(s) > budget:
            break
        take.append((i, s))
    return take


def _score_items(progress: _Progress, items: list[NullPlan]) -> tuple[dict[str, float], dict[str, Any]]:
    """Every sentence of these people's plans, through the NLL cache."""
    pairs = [
        p
        for i in items
        for plan in i.plans
        for c in plan.canaries
        for rows in sentence_pairs(plan, c, i.person.name)
        for p in rows
    ]
    # the generic subject's sentences ("This person's occupation is …") are the subject audits' too: scored under the
    # NLL cache's shared lock, so that no sentence is scored twice by a null and an audit running side by side
    shared = {
        a + b
        for i in items
        for c in i.plan.canaries
        if c.score_generic
        for a, b in sentence_pairs(i.plan, c, i.person.name)[1]
    }
    return score_all(progress, pairs, shared)  # type: ignore[arg-type]  # duck-typed context


def _per_person(spec: Spec) -> int:
    return sentences_per_person(spec.config, len(spec.pool))


def _stored(specs: list[Spec]) -> dict[int, set[int]]:
    """The people whose null facts are stored, per distribution (what earlier jobs of this null did)."""
    ids = [s.distribution_id for s in specs]
    with session_scope() as s:
        rows = s.execute(
            select(NullFact.distribution_id, NullFact.person).where(NullFact.distribution_id.in_(ids)).distinct()
        )
        out: dict[int, set[int]] = {i: set() for i in ids}
        for distribution_id, person in rows:
            out[distribution_id].add(person)
    return out


def _row(item: NullPlan, value: str, assigned: bool, st: FactStat) -> dict[str, Any]:
    return {
        "person": item.person.index,
        "name": item.person.name,
        "value": value,
        "assigned": assigned,
        "share": st.share,
        "strict": st.strict,
        "lenient": st.lenient,
        "z_star": st.z_star,
        "n_templates": st.n_templates,
        "n_z": st.n_z,
        "statistic": st.statistic,
        "n_values": st.n_values,
        "in_pool": st.in_pool,
        "misattribution": st.misattribution,
    }


def _rates(stats: list[FactStat], tail: bool = True) -> dict[str, Any]:
    null = EmpiricalNull(stats, tail)
    rate = lambda r: {"rate": r.rate, "k": r.k, "n": r.n, "ci95": [r.low, r.high]}  # noqa: E731
    zs = [s for s in stats if s.z_star is not None]
    return {
        **{name: rate(r) for name, r in fact_rates(null, MAX_P_REPORTED).items()},  # pvalue at p <= 0.01
        "mean_share": sum(s.share for s in stats) / len(stats),
        "mean_z_star_rank1": sum(s.z_star * s.n_z for s in zs) / sum(s.n_z for s in zs) if zs else None,
    }


def _stat(r: dict[str, Any]) -> FactStat:
    return FactStat(
        r["share"],
        r["strict"],
        r["lenient"],
        r["z_star"],
        r["n_templates"],
        r["n_z"],
        r.get("statistic"),
        r.get("n_values") or 1,
        r.get("in_pool") is not False,
        r.get("misattribution"),
    )


def used_rows(rows: list[dict[str, Any]], method: str, n_values: int = 1, in_pool: bool = True) -> list[dict[str, Any]]:
    """The null facts of one shape that judge a subject's fact: the people's own values for a full null, every
    pseudo-truth set for a pseudo null; out of the pool (``in_pool`` false), every person's out-of-pool truths."""
    return [
        r
        for r in rows
        if (r.get("n_values") or 1) == n_values
        and (r.get("in_pool") is not False) == in_pool
        and (r["assigned"] or method == "pseudo")
    ]


def _summary(rows: list[dict[str, Any]], method: str, tail: bool = True) -> dict[str, Any]:
    """The null's rates for single-valued facts (own values for a full null, every candidate for pseudo-truths),
    the other estimate beside them (what pseudo-truths would say of a full null's property, and the people's own
    values alone), and the p <= 0.01 rate of each shape m."""
    single = [r for r in rows if (r.get("n_values") or 1) == 1 and r.get("in_pool") is not False]
    own = [_stat(r) for r in single if r["assigned"]]
    every = [_stat(r) for r in single]
    used, other, label = (own, every, "pseudo_truths") if method == "full" else (every, own, "own_values")
    shapes: dict[str, dict[str, Any]] = {}
    for in_pool, prefix in ((True, ""), (False, "out_of_pool:")):
        for m in range(1, MAX_TRUE_VALUES + 1):
            stats = [_stat(r) for r in used_rows(rows, method, m, in_pool)]
            if stats:
                r = EmpiricalNull(stats, tail).pvalue_rate(MAX_P_REPORTED)
                shapes[f"{prefix}{m}"] = {"null_facts": len(stats), "pvalue_0.01": {"rate": r.rate, "k": r.k, "n": r.n}}
    return _rates(used, tail) | {label: _rates(other, tail), "shapes": shapes}


def _present(row: T | None) -> T:
    """``row``, unless it was deleted while this job scored (the audit erased, or its null distributions deleted):
    the job then fails with that reason, writing nothing (never an internal error)."""
    if row is None:
        raise JobError(ERASED)
    return row


def _store(
    audit_id: str,
    specs: list[Spec],
    facts: dict[int, list[dict[str, Any]]],
    fingerprint: str | None,
    cost: dict[str, Any],
) -> None:
    """One job's null facts, in one transaction (fenced by the lease) with the null's running cost: a job that
    dies stores nothing and its people are audited again by the next."""
    with session_scope() as s:
        for spec in specs:
            rows = facts[spec.distribution_id]
            if not rows:
                continue
            row = _present(s.get(NullDistribution, spec.distribution_id))
            if row.fingerprint not in (None, fingerprint):
                raise JobError("the model changed while its null was computed; submit the null audit again")
            row.fingerprint = fingerprint
            people = {r["person"] for r in rows}
            s.execute(  # a job run again replaces its people's facts
                delete(NullFact).where(NullFact.distribution_id == spec.distribution_id, NullFact.person.in_(people))
            )
            rows = [r | {"distribution_id": spec.distribution_id} for r in rows]
            s.execute(insert(NullFact.__table__), rows)  # Core, not the ORM's bulk INSERT (app/nulls/artifact.py)
        audit = _present(s.get(Audit, audit_id))
        so_far = dict((audit.summary or {}).get("cost") or {})
        total = {k: so_far.get(k, 0) + v for k, v in cost.items()}
        audit.summary = {"cost": total | {"seconds": round(total["seconds"], 1), "fingerprint": fingerprint}}


def _summarize(audit_id: str, specs: list[Spec]) -> dict[str, Any]:
    """Every person is stored: each distribution's rates and size, and the audit's summary."""
    with session_scope() as s:
        cost = dict(((_present(s.get(Audit, audit_id)).summary or {}).get("cost")) or {})
        summary: dict[str, Any] = {"properties": {}, "cost": cost}
        total = 0
        columns = [c.key for c in NullFact.__table__.columns]
        for spec in specs:
            stmt = select(NullFact).where(NullFact.distribution_id == spec.distribution_id).order_by(NullFact.id)
            rows = [{c: getattr(f, c) for c in columns} for f in s.scalars(stmt)]
            method = spec.config["method"]
            row = _present(s.get(NullDistribution, spec.distribution_id))
            row.n_facts = len(used_rows(rows, method))
            row.summary = _summary(rows, method, not is_generation(spec.config)) | {
                "people": spec.people,
                "method": method,
            }
            summary["properties"][spec.pid] = row.summary
            total += row.n_facts
    summary["null_facts"] = total
    summary["cost"]["seconds_per_null_fact"] = round(cost.get("seconds", 0) / total, 4) if total else None
    return summary
