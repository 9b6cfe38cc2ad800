"""Subject audit job (WikiMem): probe each of a subject's facts with its canaries, rank the true value
against type-consistent counterfactuals with the calibrated score, and store per-fact results.

Loads everything by audit id; scores only sentences that are not in the NLL cache; safe to run twice
(results of an earlier attempt are replaced)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from app.db.engine import session_scope
from app.db.models import Audit, Canary, CandidateScore, CounterfactualValue, FactResult, Subject
from app.subjects import repository
from app.subjects.schemas import SubjectAuditOptions
from core.measures.misattribution import misattribution
from core.measures.null import fact_stat
from core.measures.wikimem import property_outcome, subject_summary
from core.names.lookalikes import READER, lookalikes_for
from workers.jobs import asking
from workers.jobs.common import JobContext, JobError, run_audit_job
from workers.jobs.scoring import (
    CanaryPlan,
    PropertyPlan,
    canary_outcome,
    relax_near_duplicates,
    score_all,
    sentence_pairs,
    subject_plans,
)
from workers.lm.generation import get_generator


def run(audit_id: str) -> None:
    run_audit_job(audit_id, "subject", SubjectAuditOptions, _audit)


def _audit(ctx: JobContext[SubjectAuditOptions]) -> dict[str, Any]:
    with session_scope() as s:
        audit = s.get(Audit, ctx.audit_id)
        subject = s.get(Subject, audit.subject_id) if audit and audit.subject_id else None
        if subject is None:
            raise JobError("the audit's subject no longer exists (erased?)")
        name = subject.name
        plans = subject_plans(subject, ctx.options)
    opts, merged = ctx.options, 0
    if opts.near_duplicates:
        merged = relax_near_duplicates(plans, opts.near_duplicate_threshold, opts.near_duplicate_scope)
    if opts.mode == "generation":  # the look-alike scheme and reader enter the null's key, as in scoring
        scheme = lookalikes_for(name, opts.model_dump())[1]
        asked = _audit_by_asking(ctx, plans, name)
        return asked | {"near_duplicates_merged": merged, "lookalikes": scheme, "lookalike_reader": READER}
    pairs, shared = [], set()
    for plan in plans:
        for c in plan.canaries:
            rows = sentence_pairs(plan, c, name)
            pairs.extend(p for row in rows for p in row)
            if c.score_generic and c.kind != "context":  # a contextualized generic sentence holds the subject's facts
                shared.update(a + b for a, b in rows[1])
    nll, stats = score_all(ctx, pairs, shared)
    ctx.check_cancelled()
    summary = _store(ctx.audit_id, plans, name, nll, opts.alpha)
    scheme = lookalikes_for(name, opts.model_dump())[1]  # the scheme used: same_origin falls back for unknown origins
    return summary | {
        "near_duplicates_merged": merged,
        "scoring": stats,
        "lookalikes": scheme,
        "lookalike_reader": READER,
    }


def _canary_row(plan: PropertyPlan, c: CanaryPlan, name: str, nll: dict[str, float], alpha: float):
    """A canary's outcome, its row and its candidates' rows (ids filled in by ``_insert_results``)."""
    truth = plan.truth_mask
    out, rows = canary_outcome(plan, c, name, nll, alpha)
    canary = {
        "template_index": c.template_index,
        "template": c.template,
        "kind": c.kind,
        "generic_subject": c.generic,
        "similar_names": c.similar,
        "rank": out.rank,
        "lead_margin": out.lead_margin,
        "z_star": out.z_star,
        "memorized": out.memorized,
    }
    candidates = [
        {
            "value": v,
            "is_ground_truth": truth[i],
            "nll_subject": rows[0][i],
            "nll_generic": None if rows[1] is None else rows[1][i],
            "nll_similar": [r[i] for r in rows[2:]],
            "score": out.scores[i],
            "rank": out.ranks[i],
            "extra": _merge_note(plan, v),
        }
        for i, v in enumerate(plan.candidates)
    ]
    return out, canary, candidates


def _merge_note(plan: PropertyPlan, value: str) -> dict[str, Any] | None:
    if value not in plan.merged:
        return None
    truth, cos = plan.merged[value]
    return {"near_duplicate_of": truth, "cosine": cos}


def _misattribution(plan: PropertyPlan, outcomes: list) -> dict[str, Any]:
    """The fact's misattribution statistic over its templates and the false value it names (None: no false value)."""
    found = misattribution([o.scores for o in outcomes], plan.truth_mask) if outcomes else None
    if found is None:
        return {"misattribution": None, "misattributed_value": None}
    return {"misattribution": found[0], "misattributed_value": plan.candidates[found[1]]}


def _store(audit_id: str, plans: list[PropertyPlan], name: str, nll: dict[str, float], alpha: float) -> dict[str, Any]:
    """Per property: share / strict / lenient / z* over the baseline and paraphrases; contextualized canaries
    are stored beside them and counted apart (they give the model more than the name)."""
    results, context_hits, context_total = [], 0, 0
    facts, canaries, counterfactuals = [], [], []
    for k, plan in enumerate(plans):
        outcomes = []
        for c in plan.canaries:
            out, canary, candidates = _canary_row(plan, c, name, nll, alpha)
            canaries.append((k, canary, candidates))
            if c.kind == "context":
                context_total += 1
                context_hits += out.memorized
            else:
                outcomes.append(out)
        po = property_outcome(outcomes)
        n_values = sum(plan.truth_mask)
        verdict = fact_stat(outcomes, n_values)  # the verdict statistic, judged by the null of this shape
        facts.append(
            {
                "audit_id": audit_id,
                "property_id": plan.prop.pid,
                "fact_ids": plan.fact_ids,
                "share": po.share,
                "strict": po.strict,
                "lenient": po.lenient,
                "z_star": po.z_star,
                "n_templates": len(outcomes),
                "statistic": verdict.statistic,
                "n_values": n_values,
                "in_pool": plan.prop.holds(plan.ground_truths),
                **_misattribution(plan, outcomes),
            }
        )
        counterfactuals.append(plan.counterfactuals)
        results.append(po)
    with session_scope() as s:
        repository.delete_results(s, audit_id)  # a rerun replaces results
        _insert_results(s, facts, canaries, counterfactuals)
    summary: dict[str, Any] = dict(subject_summary(results))
    if context_total:
        summary["context"] = {"canaries": context_total, "memorized": context_hits}
    return summary


def _insert_results(s: Session, facts: list[dict], canaries: list[tuple], counterfactuals: list[list[str]]) -> None:
    """The results' rows by one bulk INSERT per table (facts and canaries return their ids in order), not the ORM's
    unit of work, which held ~10 % of a subject audit's time on the knowledge-free model (hundreds of candidate rows
    per audit; docs/lab/2026-11-29-suite-tail.md). ``canaries``: (fact's index, row, candidates' rows);
    ``counterfactuals``: each fact's values, in order."""
    if not facts:
        return
    fact_ids = s.scalars(insert(FactResult).returning(FactResult.id, sort_by_parameter_order=True), facts).all()
    values = [
        {"fact_result_id": fid, "position": i, "value": v}
        for fid, own in zip(fact_ids, counterfactuals, strict=True)
        for i, v in enumerate(own)
    ]
    if values:
        s.execute(insert(CounterfactualValue.__table__), values)  # Core: no ids needed (app/nulls/artifact.py)
    if not canaries:
        return
    rows = [canary | {"fact_result_id": fact_ids[k]} for k, canary, _ in canaries]
    canary_ids = s.scalars(insert(Canary).returning(Canary.id, sort_by_parameter_order=True), rows).all()
    scores = [
        candidate | {"canary_id": cid}
        for cid, (_, _, candidates) in zip(canary_ids, canaries, strict=True)
        for candidate in candidates
    ]
    if scores:
        s.execute(insert(CandidateScore.__table__), scores)


def _audit_by_asking(ctx: JobContext[SubjectAuditOptions], plans: list[PropertyPlan], name: str) -> dict[str, Any]:
    """Mode generation: ask the model K times per prompt of every fact, read the answers, store each fact's answers
    and statistic (workers/jobs/asking.py); the summary says what the audit cost (the generator's usage)."""
    generator = get_generator(ctx.model)
    gen = ctx.options.generation
    before = generator.usage.as_dict()
    groups = [asking.prompts_for(plan, name, gen) for plan in plans]
    ctx.progress(0, sum(map(len, groups)), force=True)
    errors = asking.ask_each(generator, groups, gen, ctx.options.seed, ctx.progress)
    if errors and all(errors):  # nothing was asked: the audit fails with the reason (no fact to show)
        raise JobError(errors[0] or "")
    ctx.check_cancelled()
    usage = {k: v - before[k] for k, v in generator.usage.as_dict().items()}
    opts = ctx.options
    rule = (opts.near_duplicate_threshold, opts.near_duplicate_scope) if opts.near_duplicates else None
    outcomes = _store_asked(ctx.audit_id, plans, groups, name, gen, errors, rule)
    n = len(outcomes)
    return {
        "mode": "generation",
        "properties": n,
        "facts_failed": sum(e is not None for e in errors),
        "mean_true_share": sum(o.share for o in outcomes) / n if n else 0.0,
        "mean_memorization": sum(o.share for o in outcomes) / n if n else 0.0,  # the share of true answers here
        "mean_z_star": None,
        "properties_not_memorized": sum(o.share == 0.0 for o in outcomes),
        "rank1_all": sum(o.strict for o in outcomes),
        "rank1_any": sum(o.lenient for o in outcomes),
        "generation": {"options": gen.model_dump(mode="json"), "usage": usage},
        # the fingerprint the matching null must share (read where a scoring audit's is: summary.scoring)
        "scoring": {"fingerprint": generator.fingerprint, "mode": "generation"},
    }


def _store_asked(
    audit_id: str,
    plans: list[PropertyPlan],
    groups: list[list[asking.Asked]],
    name: str,
    gen,
    errors: list,
    rule: asking.Rule,
) -> list:
    """One FactResult per property: share / strict / lenient / statistic of its answers, its misattribution
    statistic and the false value it names, and its answers read; a fact the model could not be asked about is
    stored with the reason and no statistic (its verdict says why)."""
    asked_ok = zip(plans, groups, errors, strict=True)
    read = [asking.read(p, a, asking.vocabulary([p])) if e is None else [] for p, a, e in asked_ok]
    near = asking.near_truths([(p, r, rule) for p, r in zip(plans, read, strict=True)])
    outcomes = []
    with session_scope() as s:
        repository.delete_results(s, audit_id)  # a rerun replaces results
        for plan, asked, error, readings, said in zip(plans, groups, errors, read, near, strict=True):
            if error is not None:
                s.add(_failed_fact(audit_id, plan, asked, gen, error))
                continue
            members = [i for i, t in enumerate(plan.truth_mask) if t]
            in_pool = plan.prop.holds(plan.ground_truths)
            tie = (name, plan.prop.pid, sorted(plan.ground_truths))
            stat = asking.fact_stat(plan, readings, members, in_pool, *tie, near=said)
            result = FactResult(
                audit_id=audit_id,
                property_id=plan.prop.pid,
                fact_ids=plan.fact_ids,
                share=stat.share,
                strict=stat.strict,
                lenient=stat.lenient,
                z_star=None,
                n_templates=stat.n_templates,
                statistic=stat.statistic,
                n_values=stat.n_values,
                in_pool=in_pool,
                generation=asking.fact_record(plan, asked, readings, gen),
                misattribution=stat.misattribution,
                misattributed_value=asking.misattribution(plan, readings, members, said, *tie)[1],
            )
            result.counterfactuals = [
                CounterfactualValue(position=i, value=v) for i, v in enumerate(plan.counterfactuals)
            ]
            s.add(result)
            outcomes.append(stat)
    return outcomes


def _failed_fact(audit_id: str, plan: PropertyPlan, asked: list[asking.Asked], gen, error: str) -> FactResult:
    """A fact whose prompts the generator failed on (after its retries): kept with the prompts and the reason."""
    return FactResult(
        audit_id=audit_id,
        property_id=plan.prop.pid,
        fact_ids=plan.fact_ids,
        share=0.0,
        strict=False,
        lenient=False,
        z_star=None,
        n_templates=len(asked),
        statistic=None,
        n_values=sum(plan.truth_mask),
        in_pool=plan.prop.holds(plan.ground_truths),
        generation={
            "options": gen.model_dump(mode="json"),
            "error": error,
            "prompts": [{"template_index": a.template_index, "form": a.form, "prompt": a.shown} for a in asked],
            "counts": {},
            "most_said_other": None,
            "cost": {"queries": 0, "samples": 0},
        },
    )
