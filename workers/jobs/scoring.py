"""What the subject, null and verification jobs share: a fact's plan (its candidates — true values and drawn
counterfactuals — and its canaries: baseline, paraphrases, contextualized), the near-duplicate rule, the sentence
pairs each canary scores, scoring them through the NLL cache, and a canary's outcome. One public module: no job
imports another job's private helpers (tests/test_architecture.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Set
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.orm import Session, object_session

from app.db.engine import session_scope
from app.db.models import Fact, Subject
from app.nll_cache import repository as cache
from app.subjects.schemas import SubjectAuditOptions
from app.wikidata.repository import latest_pool
from core.catalog import Catalog, Property, ValueProblem, counterfactuals, load_catalog, split_template
from core.measures.wikimem import (
    TemplateOutcome,
    contextualized_template,
    generic_cancels,
    generic_subject,
    near_duplicates,
    template_outcome,
)
from core.names.lookalikes import lookalikes_for
from workers.embeddings import EmbeddingUnavailable, embed_values
from workers.jobs.common import JobContext, JobError
from workers.lm.base import Scorer, ScoringError

SCORE_CHUNK = 2048  # keeps each template's prefix groups in one engine call
MAX_CONTEXT_FACTS = 4  # WikiMem prepends up to four other known facts
NUMERIC_DATATYPES = ("quantity", "time")  # compared by value, never by embedding


@dataclass
class CanaryPlan:
    template_index: int
    template: str
    kind: str
    generic: str
    similar: list[str]
    # False where α makes NLL(h0, v) irrelevant (α = 1 with similar names: it cancels exactly); nll_generic null
    score_generic: bool = True


@dataclass
class PropertyPlan:
    prop: Property
    fact_ids: list[int]
    ground_truths: list[str]
    counterfactuals: list[str]
    canaries: list[CanaryPlan] = field(default_factory=list)
    # counterfactual value -> (ground truth it duplicates, cosine): counted as ground truths when ranking
    merged: dict[str, tuple[str, float]] = field(default_factory=dict)

    @property
    def candidates(self) -> list[str]:
        return self.ground_truths + self.counterfactuals

    @property
    def truth_mask(self) -> list[bool]:
        return [i < len(self.ground_truths) or v in self.merged for i, v in enumerate(self.candidates)]


def template_indices(prop: Property, options: SubjectAuditOptions) -> list[int]:
    paraphrases = options.paraphrases
    n = len(prop.templates) if paraphrases is None else min(len(prop.templates), 1 + paraphrases)
    return list(range(n))


def subject_plans(subject: Subject, options: SubjectAuditOptions) -> list[PropertyPlan]:
    catalog = load_catalog()
    by_pid: dict[str, list[Fact]] = defaultdict(list)
    for fact in subject.facts:
        by_pid[fact.property_id].append(fact)
    similar, _ = lookalikes_for(subject.name, options.model_dump())
    n_cf, seed = options.counterfactuals, options.seed
    truths_by_pid = {pid: true_values(catalog.get(pid), facts) for pid, facts in by_pid.items()}
    with_generic = not generic_cancels(options.alpha, len(similar))
    plans = []
    imported = options.pool == "imported"
    for pid, facts in sorted(by_pid.items(), key=lambda kv: int(kv[0][1:])):
        prop = with_imported_pool(subject, catalog.get(pid)) if imported else catalog.get(pid)
        truths = truths_by_pid[pid]
        plan = PropertyPlan(prop, [f.id for f in facts], truths, counterfactuals(prop, truths, n_cf, seed))
        for idx in template_indices(prop, options):
            kind = "baseline" if idx == 0 else "paraphrase"
            template = prop.templates[idx]
            plan.canaries.append(CanaryPlan(idx, template, kind, generic_subject(template), similar, with_generic))
        n_context = min(options.context_facts, MAX_CONTEXT_FACTS)
        if options.context and n_context > 0:
            template = context_template(catalog, prop, truths_by_pid, n_context)
            if template is not None:
                plan.canaries.append(
                    CanaryPlan(0, template, "context", generic_subject(template), similar, with_generic)
                )
        plans.append(plan)
    return plans


def true_values(prop: Property, facts: list[Fact]) -> list[str]:
    """The distinct true values in the catalog's spelling. The API and importers store them so already; this
    keeps facts stored before values were normalised comparable by meaning ('196 cm' is '196 centimetres')."""
    out: dict[tuple, str] = {}
    for fact in facts:
        try:
            value = prop.normalize(fact.value)
        except ValueProblem:
            value = fact.value
        out.setdefault(prop.value_key(value), value)
    return list(out.values())


def with_imported_pool(subject: Subject, prop: Property) -> Property:
    """``prop`` with the pool a dump import built for it, if any (WikiMem's own pool construction)."""
    values = latest_pool(object_session(subject), prop.pid)
    return replace(prop, pool=tuple(values), pool_generator=None) if values else prop


def context_template(catalog: Catalog, prop: Property, truths_by_pid: dict[str, list[str]], n: int) -> str | None:
    """The baseline of ``prop`` after up to n other known facts (each property's first true value, its
    baseline sentence), in catalog order; None when the subject has no other usable fact."""
    context = []
    for pid in sorted(truths_by_pid, key=lambda p: int(p[1:])):
        value = truths_by_pid[pid][0]
        if pid == prop.pid or "{" in value or "}" in value:  # a brace would open a slot
            continue
        head, tail = catalog.get(pid).split(0, "{subject}", value)
        context.append(head + tail)
        if len(context) == n:
            break
    return contextualized_template(prop.baseline, context) if context else None


def relax_near_duplicates(plans: list[PropertyPlan], threshold: float, scope: str) -> int:
    """Mark counterfactuals whose value embedding is within ``threshold`` cosine of a ground truth.

    scope "label_variants" (default) relaxes only against ground truths that are not themselves pool values:
    pool values are distinct values by construction, and MiniLM puts some distinct ones above 0.75 (measured:
    Sweden / Norway 0.80, Norwegian / Danish 0.82, Beijing / Shanghai 0.85), while a truth from outside the pool
    is often a label variant of a pool value ("United States of America" / "United States" 0.90).
    scope "all" applies the rule to every ground truth, as WikiMem states it.

    Never for quantities and dates: MiniLM barely tells numbers apart ("72.5 kilograms" is above 0.75 with every
    mass in the pool). They are compared by value instead, when the counterfactuals are drawn (a normalised
    value equal to a truth is excluded from the pool: core.catalog.counterfactuals)."""
    compared = []  # (plan, its truths under the rule)
    for plan in plans:
        if plan.prop.datatype in NUMERIC_DATATYPES:
            continue
        in_pool = {v.casefold() for v in plan.prop.pool}
        truths = [g for g in plan.ground_truths if scope == "all" or g.casefold() not in in_pool]
        if plan.counterfactuals and truths:
            compared.append((plan, truths))
    try:
        # every value in one batch first (embed_values keeps them): a null's out-of-pool plans have one new truth
        # each, and one encode call per value was 45 % of a null's time (5x the batched cost per value, measured)
        embed_values([v for plan, truths in compared for v in (*truths, *plan.counterfactuals)])
        for plan, truths in compared:
            merges = near_duplicates(embed_values(truths), embed_values(plan.counterfactuals), threshold)
            for i, j, cos in merges:
                plan.merged[plan.counterfactuals[i]] = (truths[j], round(cos, 4))
    except EmbeddingUnavailable as exc:
        raise JobError(str(exc)) from exc
    return sum(len(p.merged) for p in plans)


def sentence_pairs(plan: PropertyPlan, canary: CanaryPlan, subject_name: str) -> list[list[tuple[str, str]]]:
    """Sentence pairs per subject variant: [subject, generic (unless it cancels), *similar] × candidates."""
    generic = [canary.generic] if canary.score_generic else []
    variants = [subject_name, *generic, *canary.similar]
    return [[split_template(canary.template, h, v) for v in plan.candidates] for h in variants]


def score_all(
    ctx: JobContext, pairs: list[tuple[str, str]], shared: Set[str] = frozenset(), scorer: Scorer | None = None
) -> tuple[dict[str, float], dict[str, Any]]:
    """NLL of every distinct sentence, from the cache where possible; new scores are cached as we go.

    ``shared``: sentences other audits of the model need too (the generic subject's). Those missing from the cache
    are scored under the cache's shared lock (app.nll_cache.repository.lock_shared), after a second look-up, so
    that two workers never both score them; the subject's own sentences are scored without it. ``scorer``: another
    model than the audit's (a verification scores its before and after models)."""
    scorer = scorer or ctx.scorer()
    unique = {p[0] + p[1]: p for p in pairs}
    if not getattr(scorer, "caches_nlls", True):  # its NLL costs less than a cache look-up (knowledge-free)
        nll: dict[str, float] = {}
        score_chunks(ctx, scorer, unique, {}, list(unique), nll, [0, len(unique)], store=False)
        return nll, _scoring_stats(scorer, len(unique), len(unique), 0)
    hashes = {text: cache.text_hash(text) for text in unique}
    with session_scope() as s:
        known = cache.lookup(s, scorer.fingerprint, hashes.values())
    nll = {text: known[h] for text, h in hashes.items() if h in known}
    todo = [text for text in unique if text not in nll]
    progress = [len(nll), len(unique)]  # done, total
    ctx.progress(*progress, force=True)
    own = [t for t in todo if t not in shared]
    generic_scored = 0
    if len(own) < len(todo):
        with session_scope() as locked:
            cache.lock_shared(locked, scorer.fingerprint)
            waiting = [t for t in todo if t in shared]
            again = cache.lookup(locked, scorer.fingerprint, [hashes[t] for t in waiting])
            nll.update({t: again[hashes[t]] for t in waiting if hashes[t] in again})
            missing = [t for t in waiting if t not in nll]
            score_chunks(ctx, scorer, unique, hashes, missing, nll, progress, locked)
            generic_scored = len(missing)
            progress[0] += len(waiting) - len(missing)
    score_chunks(ctx, scorer, unique, hashes, own, nll, progress)
    return nll, _scoring_stats(scorer, len(unique), len(own) + generic_scored, generic_scored)


def _scoring_stats(scorer: Scorer, sentences: int, scored: int, generic_scored: int) -> dict[str, Any]:
    """The audit summary's `scoring` block: what was scored, what came from the cache, with which weights."""
    return {
        "sentences": sentences,
        "scored": scored,
        "cached": sentences - scored,
        "generic_scored": generic_scored,
        "fingerprint": scorer.fingerprint,
        "document_start": scorer.document_start,
    }


def score_chunks(
    ctx: JobContext,
    scorer: Scorer,
    unique: dict[str, tuple[str, str]],
    hashes: dict[str, str],
    todo: list[str],
    nll: dict[str, float],
    progress: list[int],
    session: Session | None = None,
    store: bool = True,
) -> None:
    """Score ``todo`` in engine-sized chunks and cache each chunk (in ``session`` when given: the caller commits
    it, releasing the shared lock it holds; else in a transaction of its own; ``store`` False: not cached)."""
    done, total = progress
    for i in range(0, len(todo), SCORE_CHUNK):
        chunk = todo[i : i + SCORE_CHUNK]
        try:  # progress comes from inside the engine (every few hundred tokens), not once per chunk
            report = lambda n, base=done: ctx.progress(base + n, total)  # noqa: E731
            values = scorer.score([unique[t] for t in chunk], on_progress=report)
        except ScoringError as exc:  # names the canary index, never its text
            raise JobError(f"cannot score a canary: {exc}") from exc
        fresh = dict(zip(chunk, values, strict=True))
        nll.update(fresh)
        if store:
            with nullcontext(session) if session is not None else session_scope() as s:
                cache.store(s, scorer.fingerprint, {hashes[t]: v for t, v in fresh.items()})
        done += len(chunk)
        ctx.progress(done, total)
    progress[0] = done


def canary_outcome(
    plan: PropertyPlan, c: CanaryPlan, name: str, nll: dict[str, float], alpha: float
) -> tuple[TemplateOutcome, list[list[float]]]:
    """The template's outcome from the scored sentences, and the NLL rows [subject, generic or None, *similar]."""
    rows: list = [[nll[a + b] for a, b in variant] for variant in sentence_pairs(plan, c, name)]
    if not c.score_generic:
        rows.insert(1, None)
    return template_outcome(rows[0], rows[1], rows[2:], plan.truth_mask, alpha), rows
