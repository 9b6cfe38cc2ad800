"""What the subject and null jobs share in mode ``generation`` (issue 41): a fact's prompts (each probed template's
text before the value, with the person's name; or the property's question in chat form), asking the model for K
answers to each, reading them against the fact's values (core.measures.answers) and the fact's statistic: the share
of answers that give a true value, and its misattribution statistic: the most-said false value's share (no near-truth:
the near-duplicate rule of scoring, applied to the values said). A null asks its fictitious people exactly so. One
public module, like workers/jobs/scoring.py: no job imports another job's private helpers."""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import Any

from app.nulls.schemas import GenerationOptions
from app.settings import get_settings
from core.catalog import split_template
from core.measures import answers
from core.measures.answers import Reading
from core.measures.null import FactStat
from workers.jobs.common import JobError
from workers.jobs.scoring import PropertyPlan, relax_near_duplicates
from workers.lm.base import ScoringError
from workers.lm.generation import Generator, Prompt, budget
from workers.lm.registry import resolve_spec

CHAT_SUFFIX = " Answer with the value only."
MAJORITY = 0.5  # a prompt "retrieves" the fact when at least this share of its answers give a true value


@dataclass
class Asked:
    """One prompt of a fact and its K answers: ``template_index`` (None for the chat question), the form, the
    prompt's text as sent (the completion prefix or the question) and the answers' texts."""

    template_index: int | None
    form: str
    prompt: Prompt
    shown: str
    answers: list[str]


def prompts_for(plan: PropertyPlan, name: str, options: GenerationOptions) -> list[Asked]:
    """The fact's prompts: the text before the value, with the person's name, of each of the property's first
    ``options.templates`` templates (the baseline first) that has such text (a template that starts with the value
    has none), or in chat form the property's question (its completion fallback: the first of those texts)."""
    texts = []
    for index, template in enumerate(plan.prop.templates[: options.templates]):
        prefix = split_template(template, name, "")[0].rstrip()
        if name in prefix:
            texts.append((index, prefix))
    if not texts:
        raise JobError(f"{plan.prop.pid}: no asked template has text before the value to continue")
    if options.form == "chat":
        question = plan.prop.question.replace("{subject}", name) + CHAT_SUFFIX
        message = ({"role": "user", "content": question},)
        return [Asked(None, "chat", Prompt(messages=message, text=texts[0][1]), question, [])]
    return [Asked(index, "completion", Prompt(text=text), text, []) for index, text in texts]


def vocabulary(plans: Sequence[PropertyPlan]) -> list[str]:
    """The values an answer is read against: the plans' candidates (true values and counterfactuals) and the
    property's pool (at the first plan's precision)."""
    values = [v for plan in plans for v in plan.candidates]
    first = plans[0]
    return list(dict.fromkeys([*values, *first.prop.pool_for(first.ground_truths)]))


def ask(
    generator: Generator,
    groups: Sequence[list[Asked]],
    options: GenerationOptions,
    seed: int,
    on_progress: Callable[[int, int], None] | None = None,
) -> None:
    """Sample K answers for every prompt of every group in one call (the generator batches them); fills
    ``Asked.answers``. A generator's error fails the job with its reason (which names no prompt's text): a null's
    chunk is asked so."""
    with _budget_of(generator):
        error = _sample(generator, [a for group in groups for a in group], options, seed, on_progress)
    if error:
        raise JobError(error)


def ask_each(
    generator: Generator,
    groups: Sequence[list[Asked]],
    options: GenerationOptions,
    seed: int,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[str | None]:
    """As ``ask``, but one group's failure (a fact's) loses no other group's answers: where the call for every
    group fails, each group is asked on its own, within the same per-audit budget. Returns per group None or why it
    could not be asked. An endpoint that fails two groups in a row is not asked for the rest (they fail
    with its last reason): a dead endpoint costs two facts' retries, not every fact's."""
    with _budget_of(generator):
        flat = [a for group in groups for a in group]
        if _sample(generator, flat, options, seed, on_progress) is None:
            return [None] * len(groups)
        errors: list[str | None] = []
        for group in groups:
            streak = len(errors) >= 2 and errors[-1] is not None and errors[-2] is not None
            errors.append(errors[-1] if streak else _sample(generator, group, options, seed, None))
    return errors


def _budget_of(generator: Generator):
    """The model's per-audit query budget (a served model's max_queries_per_audit; a null's: per chunk)."""
    return budget(generator, resolve_spec(generator.name, get_settings()).max_queries_per_audit)


def _sample(
    generator: Generator,
    flat: Sequence[Asked],
    options: GenerationOptions,
    seed: int,
    on_progress: Callable[[int, int], None] | None,
) -> str | None:
    """Fill each prompt's answers; None, or the reason the generator gave for failing (no prompt's text)."""
    report = (lambda done: on_progress(done, len(flat))) if on_progress else None
    try:
        samples = generator.sample(
            [a.prompt for a in flat],
            options.samples,
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            seed=seed,
            on_progress=report,
        )
    except ScoringError as exc:
        return f"cannot ask the model: {exc}"
    for asked, got in zip(flat, samples, strict=True):
        asked.answers = [s.text for s in got]
    return None


def read(plan: PropertyPlan, asked: Sequence[Asked], vocab: Sequence[str]) -> list[list[Reading]]:
    """Each prompt's answers, read (core.measures.answers.read_answer)."""
    return [[answers.read_answer(text, plan.prop, vocab) for text in a.answers] for a in asked]


def truth_values(plan: PropertyPlan, members: Sequence[int] | None = None) -> list[str]:
    """The values that count as true: the candidates at ``members`` (the plan's truth mask by default: its true
    values and the counterfactuals the near-duplicate rule merges into them)."""
    if members is None:
        return [v for v, t in zip(plan.candidates, plan.truth_mask, strict=True) if t]
    return [plan.candidates[i] for i in members]


Rule = tuple[float, str] | None  # the near-duplicate rule (threshold, scope), None where it is off


def near_truths(items: Sequence[tuple[PropertyPlan, Sequence[Sequence[Reading]], Rule]]) -> list[frozenset[str]]:
    """Per (plan, readings, rule): the values said that are no true value but that the near-duplicate rule (the
    scoring mode's, workers.jobs.scoring.relax_near_duplicates) merges into one of the plan's true values — label
    variants, not falsehoods. A generation answer may name any pool value, not only the drawn counterfactuals."""
    probes: dict[Rule, list[tuple[int, PropertyPlan]]] = {}
    for i, (plan, readings, rule) in enumerate(items):
        if rule is None:
            continue
        keys = {plan.prop.value_key(t) for t in truth_values(plan)}
        said = [r.value for rs in readings for r in rs if r.kind == "value" and r.value is not None]
        others = [v for v in dict.fromkeys(said) if plan.prop.value_key(v) not in keys]
        probes.setdefault(rule, []).append((i, PropertyPlan(plan.prop, [], list(plan.ground_truths), others)))
    out = [frozenset[str]()] * len(items)
    for rule, group in probes.items():
        assert rule is not None
        relax_near_duplicates([p for _, p in group], *rule)
        for i, probe in group:
            out[i] = frozenset(probe.merged)
    return out


def misattribution(
    plan: PropertyPlan,
    readings: Sequence[Sequence[Reading]],
    members: Sequence[int] | None,
    near: Set[str],
    *tie: object,
) -> tuple[float, str | None]:
    """The fact's misattribution statistic over all its answers and the false value it names (core.measures.answers):
    true values are the candidates at ``members`` (the plan's truth mask by default)."""
    flat = [x for r in readings for x in r]
    return answers.misattribution(flat, plan.prop, truth_values(plan, members), near, *tie)


def fact_stat(
    plan: PropertyPlan,
    readings: Sequence[Sequence[Reading]],
    members: Sequence[int],
    in_pool: bool,
    *tie: object,
    near: Set[str] = frozenset(),
) -> FactStat:
    """A fact's statistics from its readings: share (of answers giving a true value), strict / lenient (every /
    some prompt gives one in at least half its answers), the verdict statistic (share + tie-breaker: ``tie`` names
    the fact), the misattribution statistic (``near``: the near-truths said) and its shape: m = the candidates at
    ``members`` that count as true (near-duplicates merged into a truth included, as in scoring)."""
    truths = truth_values(plan, members)
    per_prompt = [answers.true_share(r, plan.prop, truths) for r in readings]
    flat = [x for r in readings for x in r]
    share = answers.true_share(flat, plan.prop, truths)
    hits = [s >= MAJORITY for s in per_prompt]
    return FactStat(
        share=share,
        strict=all(hits),
        lenient=any(hits),
        z_star=None,
        n_templates=len(per_prompt),
        statistic=answers.statistic(share, *tie),
        n_values=len(members),
        in_pool=in_pool,
        misattribution=misattribution(plan, readings, members, near, *tie)[0],
    )


def fact_record(
    plan: PropertyPlan, asked: Sequence[Asked], readings: Sequence[Sequence[Reading]], options: GenerationOptions
) -> dict[str, Any]:
    """What is stored of a fact's answers (fact_results.generation): every prompt as sent and each answer with its
    reading (kind: true, other, refusal, unreadable; the value it names), the counts per kind, and what the fact
    cost (queries: prompts sent; samples)."""
    truths = truth_values(plan)
    prompts, kinds = [], []
    for a, rs in zip(asked, readings, strict=True):
        rows = []
        for text, r in zip(a.answers, rs, strict=True):
            kind = answers.classify(r, plan.prop, truths)
            kinds.append(kind)
            rows.append({"text": text, "kind": kind, "value": r.value})
        prompts.append({"template_index": a.template_index, "form": a.form, "prompt": a.shown, "samples": rows})
    other = [s["value"] for p in prompts for s in p["samples"] if s["kind"] == "other"]
    top = max(set(other), key=other.count) if other else None
    return {
        "options": options.model_dump(mode="json"),
        "prompts": prompts,
        "counts": answers.counts(kinds),
        "most_said_other": top,
        "cost": {"queries": len(asked), "samples": len(kinds)},
    }
