"""A verification's people (issue 26): each person's before audit redone exactly on the after model — its stored
configuration and counterfactual draws — with the probes scored beside it: held-out templates (those the forget set
did not expose, on both models) and the before audit's contextualized canaries. Stores template outcomes only."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from app.db.engine import session_scope
from app.db.models import Audit, Subject
from app.db.models.verification import VerificationFact, VerificationPerson
from app.subjects import repository as subjects
from app.subjects.schemas import SubjectAuditOptions
from app.verification import repository
from app.verification.schemas import FactStatus, PersonRole, VerificationStored
from core.measures.null import fact_stat, pool_roles, pool_statistic
from core.measures.wikimem import generic_subject
from workers.jobs.common import JobContext, JobError
from workers.jobs.scoring import (
    CanaryPlan,
    PropertyPlan,
    canary_outcome,
    relax_near_duplicates,
    score_all,
    sentence_pairs,
    subject_plans,
)
from workers.lm.base import Scorer

GENERATION_BEFORE = (
    "a before audit was made in mode generation, and a verification re-probes by scoring: audit the people in mode"
    " scoring before and verify those audits"
)


@dataclass
class BeforePlan:
    """A person's before audit, ready to redo: the subject's name, per property the plan with its stored
    counterfactual draws (contextualized canaries apart, in ``context``), the stored results, options and audit."""

    name: str = ""
    plans: list[PropertyPlan] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    options: SubjectAuditOptions = field(default_factory=SubjectAuditOptions)
    audit: Audit | None = None
    context: dict[str, CanaryPlan] = field(default_factory=dict)  # per property, when the before audit had them


def person_plans(s, person: VerificationPerson) -> BeforePlan:
    """The before audit's plan, exactly: its options, and per property its stored counterfactual draws; its
    contextualized canaries (``options.context``) apart, for the context probe."""
    before = s.get(Audit, person.before_audit_id) if person.before_audit_id else None
    subject = s.get(Subject, person.subject_id)
    if before is None or subject is None:
        return BeforePlan(audit=before)
    out = BeforePlan(name=subject.name, options=SubjectAuditOptions.model_validate(before.options or {}), audit=before)
    if out.options.mode != "scoring":  # its null and statistic are generation's: re-scored, they would not compare
        raise JobError(GENERATION_BEFORE)
    out.results = {r.property_id: r for r in subjects.results_for_audit(s, before.id, with_candidates=False)}
    for plan in subject_plans(subject, out.options):
        if plan.prop.pid not in out.results:
            continue
        result = out.results[plan.prop.pid]
        plan.counterfactuals = [cf.value for cf in sorted(result.counterfactuals, key=lambda cf: cf.position)]
        out.context.update((plan.prop.pid, c) for c in plan.canaries if c.kind == "context")
        plan.canaries = [c for c in plan.canaries if c.kind != "context"]
        out.plans.append(plan)
    return out


def held_out_canaries(plan: PropertyPlan, exposed: list[int] | None, n: int) -> list[CanaryPlan]:
    """Up to ``n`` templates of the property the forget set did not expose (default: the audited ones)."""
    shown = set(exposed) if exposed is not None else {c.template_index for c in plan.canaries}
    first = plan.canaries[0]
    out = []
    for idx, template in enumerate(plan.prop.templates):
        if idx in shown:
            continue
        out.append(CanaryPlan(idx, template, "held_out", generic_subject(template), first.similar, first.score_generic))
        if len(out) == n:
            break
    return out


def outcomes(plan: PropertyPlan, canaries: list[CanaryPlan], name: str, nll: dict[str, float], alpha: float) -> list:
    return [canary_outcome(plan, c, name, nll, alpha)[0] for c in canaries]


def probe_pairs(plans: list[PropertyPlan], canaries: dict[str, list[CanaryPlan]], name: str) -> list[tuple[str, str]]:
    """Every sentence pair of these canaries, as the subject job scores them."""
    return [p for plan in plans for c in canaries[plan.prop.pid] for row in sentence_pairs(plan, c, name) for p in row]


def stat_of(plan: PropertyPlan, outcomes: list) -> dict[str, Any]:
    """The fact's statistics, and where it has values in and out of the pool its pool values' own (``pool``), as the
    calibrator judges a stored result (app.nulls.calibrate)."""
    stat = fact_stat(outcomes, sum(plan.truth_mask))
    in_pool, pool = plan.prop.holds(plan.ground_truths), None
    if not in_pool and stat.n_values > 1:
        n = len(plan.ground_truths)
        owners = [
            v if i < n else plan.merged[v][0] if v in plan.merged else None for i, v in enumerate(plan.candidates)
        ]
        roles = pool_roles(plan.prop, owners)
        pool = pool_statistic([list(zip(o.scores, roles, strict=True)) for o in outcomes])
    return asdict(stat) | {"in_pool": in_pool, "pool": pool}


def score_person(ctx: JobContext[VerificationStored], person_id: int, after: Scorer, before: Scorer | None) -> None:
    """Redo one person's before audit on the after model, with the probes, and store a row per fact (inconclusive
    until the verdicts)."""
    with session_scope() as s:
        person = s.get(VerificationPerson, person_id)
        b = person_plans(s, person)
        exposed, targets, role = dict(person.exposed or {}), set(person.targets or []), person.role
    plans, options, context = b.plans, b.options, b.context
    if options.near_duplicates and plans:
        relax_near_duplicates(plans, options.near_duplicate_threshold, options.near_duplicate_scope)
    audited = {p.prop.pid: p.canaries for p in plans}
    held = {p.prop.pid: held_out_canaries(p, exposed.get(p.prop.pid), ctx.options.held_out_templates) for p in plans}
    probed = {k: audited[k] + held[k] + ([context[k]] if k in context else []) for k in audited}
    after_nll = score_all(ctx, probe_pairs(plans, probed, b.name), scorer=after)[0]
    before_nll = score_all(ctx, probe_pairs(plans, held, b.name), scorer=before)[0] if before is not None else {}
    rows = []
    for plan in plans:
        pid = plan.prop.pid
        detail = _detail(b, plan, audited[pid], held[pid] if before is not None else [], after_nll, before_nll)
        rows.append((pid, role == PersonRole.FORGOTTEN and pid in targets, detail))
    with session_scope() as s:
        repository.delete_facts(s, person_id)  # a rerun of this step replaces its rows
        for pid, is_target, detail in rows:
            s.add(
                VerificationFact(
                    person_id=person_id,
                    audit_id=ctx.audit_id,
                    property_id=pid,
                    target=is_target,
                    status=FactStatus.INCONCLUSIVE,
                    detail=detail,
                )
            )
        s.get(VerificationPerson, person_id).scored = True


def _detail(
    b: BeforePlan,
    plan: PropertyPlan,
    audited: list[CanaryPlan],
    held: list[CanaryPlan],
    after_nll: dict[str, float],
    before_nll: dict[str, float],
) -> dict[str, Any]:
    """One fact's template outcomes on both models (the before side as the before audit stored them), and the raw
    outcomes of its probes: ``held`` (held-out templates, scored on both models) and the context canary."""
    name, alpha, result = b.name, b.options.alpha, b.results[plan.prop.pid]
    before_t = {c.template_index: bool(c.memorized) for c in result.canaries if c.kind != "context"}
    after_out = outcomes(plan, audited, name, after_nll, alpha)
    idx = [c.template_index for c in audited]
    detail: dict[str, Any] = {
        "templates": idx,
        "before_templates": [before_t.get(i, False) for i in idx],
        "after_templates": [o.memorized for o in after_out],
        "after_stat": stat_of(plan, after_out),
        "candidates": len(plan.candidates),
        "truths": sum(plan.truth_mask),
    }
    if held:
        detail["held_out_raw"] = {
            "templates": [c.template_index for c in held],
            "before": [o.memorized for o in outcomes(plan, held, name, before_nll, alpha)],
            "after": [o.memorized for o in outcomes(plan, held, name, after_nll, alpha)],
        }
    before_context = next((c for c in result.canaries if c.kind == "context"), None)
    if plan.prop.pid in b.context and before_context is not None:
        (out,) = outcomes(plan, [b.context[plan.prop.pid]], name, after_nll, alpha)
        detail["context_raw"] = {"before": bool(before_context.memorized), "after": bool(out.memorized)}
    return detail
