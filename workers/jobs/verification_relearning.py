"""A verification's relearning probe (issue 26): a few fine-tuning steps of the after model on texts of the relearned
people (their other facts, or their forget-set facts), then every forgotten person's forget-set facts audited on it
again; and what the summary says of it."""

from __future__ import annotations

import tempfile
from pathlib import Path

from app.db.engine import session_scope
from app.db.models.verification import VerificationPerson
from app.settings import get_settings
from app.verification import repository
from app.verification.schemas import PersonRole, VerificationStored
from workers.jobs.common import JobContext
from workers.jobs.scoring import relax_near_duplicates, score_all
from workers.jobs.verification_people import outcomes, person_plans, probe_pairs, stat_of
from workers.lm.base import Scorer
from workers.lm.registry import ModelLoadError, load_directory, resolve_spec

NO_TEXTS = (
    "the relearned people have no facts outside the forget set to fine-tune on: give relearning.texts = forget_set"
    " (their forget-set facts) or other people"
)
NO_RELEARNING = (
    "the after model is not a transformers directory the service can train (a served, GGUF or hub model): no"
    " relearning probe"
)


def trainable(model: str) -> Path | None:
    """The after model's transformers directory, if the service can fine-tune it (None: it cannot)."""
    try:
        spec = resolve_spec(model, get_settings())
    except ModelLoadError:
        return None
    if spec.backend != "hf" or not spec.path or spec.gguf_file:
        return None
    directory = Path(spec.path).expanduser()
    return directory if (directory / "config.json").is_file() else None


def unavailable(people: list[VerificationPerson], reason: str) -> None:
    for p in people:
        p.summary = {**(p.summary or {}), "relearning": "unavailable", "relearning_reason": reason}


def relearning_texts(s, people: list[VerificationPerson], source: str) -> tuple[list[str], list[str]]:
    """The fine-tuning texts: the relearned people's facts outside the forget set (``other_facts``) or in it
    (``forget_set``), every true value in each template the verification audits; and the relearned people's names
    (scope ``subject`` fine-tunes their name tokens' rows)."""
    texts, names = [], []
    for p in people:
        if not p.relearned:
            continue
        planned = person_plans(s, p)
        name, plans = planned.name, planned.plans
        names.append(name)
        for plan in plans:
            if (plan.prop.pid in (p.targets or [])) == (source == "forget_set"):
                for c in plan.canaries:
                    texts += [plan.prop.render(c.template_index, name, v) for v in plan.ground_truths]
    return texts, names


def relearning_probe(ctx: JobContext[VerificationStored]) -> None:
    """Fine-tune the after model on texts of the relearned people (their other facts, or their forget-set facts),
    then audit every forgotten person's forget-set facts on it again. Once per verification."""
    opts = ctx.options.relearning or {}
    with session_scope() as s:
        people = [p for p in repository.people(s, ctx.audit_id) if p.role == PersonRole.FORGOTTEN]
        if all((p.summary or {}).get("relearning") for p in people):
            return
        directory = trainable(ctx.model)
        if directory is None:
            unavailable(people, NO_RELEARNING)
            return
        texts, names = relearning_texts(s, people, str(opts.get("texts", "other_facts")))
        if not texts:
            unavailable(people, NO_TEXTS)
            return
        ids = [p.id for p in people]
    from workers.unlearning.relearn import relearn  # torch: imported where the probe runs

    with tempfile.TemporaryDirectory(prefix="memaudit-relearn-") as tmp:
        steps, scope = int(opts.get("steps", 20)), str(opts.get("scope", "all"))
        relearn(directory, texts, Path(tmp) / "model", steps=steps, lr=opts.get("lr"), scope=scope, subjects=names)
        ctx.check_cancelled()
        scorer = load_directory(f"{ctx.model} (relearned)", Path(tmp) / "model")
        for person_id in ids:
            score_relearned(ctx, person_id, scorer)
        del scorer


def score_relearned(ctx: JobContext[VerificationStored], person_id: int, scorer: Scorer) -> None:
    with session_scope() as s:
        person = s.get(VerificationPerson, person_id)
        planned = person_plans(s, person)
        name, options = planned.name, planned.options
        plans = [p for p in planned.plans if p.prop.pid in (person.targets or [])]
    if options.near_duplicates and plans:
        relax_near_duplicates(plans, options.near_duplicate_threshold, options.near_duplicate_scope)
    nll = score_all(ctx, probe_pairs(plans, {p.prop.pid: p.canaries for p in plans}, name), scorer=scorer)[0]
    found = {}
    for plan in plans:
        out = outcomes(plan, plan.canaries, name, nll, options.alpha)
        found[plan.prop.pid] = {"templates": [o.memorized for o in out], "stat": stat_of(plan, out)}
    with session_scope() as s:
        person = s.get(VerificationPerson, person_id)
        for fact in person.facts:
            if fact.property_id in found:
                fact.detail = {**(fact.detail or {}), "relearn_raw": found[fact.property_id]}
        person.summary = {**(person.summary or {}), "relearning": "scored"}
