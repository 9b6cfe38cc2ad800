"""Subject audit job (WikiMem): probe each of a subject's facts with its canaries, rank the true value
against type-consistent counterfactuals with the calibrated score, and store per-fact results.

Loads everything by audit id; scores only sentences that are not in the NLL cache; safe to run twice
(results of an earlier attempt are replaced)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete

from app.catalog import Property, counterfactuals, load_catalog
from app.db.engine import session_scope
from app.db.models import Audit, Canary, CandidateScore, CounterfactualValue, Fact, FactResult, Subject
from app.nll_cache import repository as cache
from workers.jobs.common import JobContext, JobError, run_audit_job
from workers.measures.wikimem import generic_subject, property_outcome, similar_names, template_outcome

SCORE_CHUNK = 256


@dataclass
class CanaryPlan:
    template_index: int
    template: str
    kind: str
    generic: str
    similar: list[str]


@dataclass
class PropertyPlan:
    prop: Property
    fact_ids: list[int]
    ground_truths: list[str]
    counterfactuals: list[str]
    canaries: list[CanaryPlan] = field(default_factory=list)

    @property
    def candidates(self) -> list[str]:
        return self.ground_truths + self.counterfactuals


def run(audit_id: str) -> None:
    run_audit_job(audit_id, "subject", _audit)


def _template_indices(prop: Property, options: dict[str, Any]) -> list[int]:
    paraphrases = options.get("paraphrases")
    n = len(prop.templates) if paraphrases is None else min(len(prop.templates), 1 + int(paraphrases))
    return list(range(n))


def _plan(subject: Subject, options: dict[str, Any]) -> list[PropertyPlan]:
    catalog = load_catalog()
    by_pid: dict[str, list[Fact]] = defaultdict(list)
    for fact in subject.facts:
        by_pid[fact.property_id].append(fact)
    n_similar = int(options.get("similar_names", 2))
    n_cf = int(options.get("counterfactuals", 100))
    seed = int(options.get("seed", 0))
    plans = []
    for pid, facts in by_pid.items():
        prop = catalog.get(pid)
        truths = list(dict.fromkeys(f.value for f in facts))
        plan = PropertyPlan(prop, [f.id for f in facts], truths, counterfactuals(prop, truths, n_cf, seed))
        for idx in _template_indices(prop, options):
            template = prop.templates[idx]
            plan.canaries.append(
                CanaryPlan(
                    idx,
                    template,
                    "baseline" if idx == 0 else "paraphrase",
                    generic_subject(template),
                    similar_names(subject.name, n_similar),
                )
            )
        plans.append(plan)
    return plans


def _pairs(plan: PropertyPlan, canary: CanaryPlan, subject_name: str) -> list[list[tuple[str, str]]]:
    """Sentence pairs per subject variant: [subject, generic, *similar] × candidates."""
    variants = [subject_name, canary.generic, *canary.similar]
    return [[plan.prop.split(canary.template_index, h, v) for v in plan.candidates] for h in variants]


def _score_all(ctx: JobContext, pairs: list[tuple[str, str]]) -> tuple[dict[str, float], dict[str, int]]:
    """NLL of every distinct sentence, from the cache where possible; new scores are cached as we go."""
    from workers.lm.base import ModelLoadError, ScoringError
    from workers.lm.registry import get_scorer

    try:
        scorer = get_scorer(ctx.model)
    except ModelLoadError as exc:
        raise JobError(str(exc)) from exc
    unique = {p[0] + p[1]: p for p in pairs}
    hashes = {text: cache.text_hash(text) for text in unique}
    with session_scope() as s:
        known = cache.lookup(s, scorer.fingerprint, hashes.values())
    nll = {text: known[h] for text, h in hashes.items() if h in known}
    todo = [text for text in unique if text not in nll]
    total, done = len(unique), len(nll)
    ctx.progress(done, total, force=True)
    for i in range(0, len(todo), SCORE_CHUNK):
        chunk = todo[i : i + SCORE_CHUNK]
        try:
            values = scorer.score([unique[t] for t in chunk])
        except ScoringError as exc:  # names the canary index, never its text
            raise JobError(f"cannot score a canary: {exc}") from exc
        fresh = dict(zip(chunk, values, strict=True))
        nll.update(fresh)
        with session_scope() as s:
            cache.store(s, scorer.fingerprint, {hashes[t]: v for t, v in fresh.items()})
        done += len(chunk)
        ctx.progress(done, total)
    stats = {"sentences": total, "scored": len(todo), "cached": total - len(todo)}
    return nll, stats | {"fingerprint": scorer.fingerprint, "document_start": scorer.document_start}


def _audit(ctx: JobContext) -> dict[str, Any]:
    with session_scope() as s:
        audit = s.get(Audit, ctx.audit_id)
        subject = s.get(Subject, audit.subject_id) if audit and audit.subject_id else None
        if subject is None:
            raise JobError("the audit's subject no longer exists (erased?)")
        name = subject.name
        plans = _plan(subject, ctx.options)
    pairs = [p for plan in plans for c in plan.canaries for rows in _pairs(plan, c, name) for p in rows]
    nll, stats = _score_all(ctx, pairs)
    ctx.check_cancelled()
    alpha = float(ctx.options.get("alpha", 1.0))
    summary = _store(ctx.audit_id, plans, name, nll, alpha)
    return summary | {"scoring": stats}


def _store(
    audit_id: str, plans: list[PropertyPlan], name: str, nll: dict[str, float], alpha: float
) -> dict[str, Any]:
    results = []
    with session_scope() as s:
        s.execute(delete(FactResult).where(FactResult.audit_id == audit_id))  # a rerun replaces results
        for plan in plans:
            truth = [i < len(plan.ground_truths) for i in range(len(plan.candidates))]
            outcomes, canaries = [], []
            for c in plan.canaries:
                rows = [[nll[a + b] for a, b in variant] for variant in _pairs(plan, c, name)]
                out = template_outcome(rows[0], rows[1], rows[2:], truth, alpha)
                outcomes.append(out)
                canary = Canary(
                    template_index=c.template_index, template=c.template, kind=c.kind,
                    generic_subject=c.generic, similar_names=c.similar, rank=out.rank,
                    lead_margin=out.lead_margin, z_star=out.z_star, memorized=out.memorized,
                )
                canary.candidates = [
                    CandidateScore(
                        value=v, is_ground_truth=truth[i], nll_subject=rows[0][i], nll_generic=rows[1][i],
                        nll_similar=[r[i] for r in rows[2:]], score=out.scores[i], rank=out.ranks[i],
                    )
                    for i, v in enumerate(plan.candidates)
                ]
                canaries.append(canary)
            po = property_outcome(outcomes)
            result = FactResult(
                audit_id=audit_id, property_id=plan.prop.pid, fact_ids=plan.fact_ids, share=po.share,
                strict=po.strict, lenient=po.lenient, z_star=po.z_star, n_templates=len(outcomes),
            )
            result.canaries = canaries
            result.counterfactuals = [
                CounterfactualValue(position=i, value=v) for i, v in enumerate(plan.counterfactuals)
            ]
            s.add(result)
            results.append(po)
    return _summary(results)


def _summary(results: list) -> dict[str, Any]:
    zs = [r.z_star for r in results if r.z_star is not None]
    return {
        "properties": len(results),
        "memorized_lenient": sum(r.lenient for r in results),
        "memorized_strict": sum(r.strict for r in results),
        "mean_share": sum(r.share for r in results) / len(results) if results else 0.0,
        "mean_z_star": sum(zs) / len(zs) if zs else None,
        "zero_memorization": sum(r.share == 0 for r in results),
    }
