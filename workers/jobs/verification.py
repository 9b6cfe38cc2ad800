"""Verification job (issue 26): redo each person's subject audit on the after (unlearned) model with the before
audit's stored configuration — its templates, its counterfactual draws (read from the stored result), look-alikes
and α — then judge every fact against each model's own null, pair the template outcomes (exact McNemar), and run
the probes: held-out templates (those the forget set did not expose, on both models), contextualized canaries (when
the before audit had them: its other known facts, then the baseline, redone on the after model) and relearning (a
few fine-tuning steps of the after model on part of the forget set, then the forgotten facts audited again).

Works in steps (``NextStep``): PEOPLE_PER_STEP people per job, then the relearning probe, then a wait (a short
sleep per step) until the nulls the verdicts need have finished, then the verdicts, the summary and one evidence
entry per forgotten person. Stores ids, p-values and template outcomes only; names and values stay in the
subject tables (erasing a subject deletes its rows here)."""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sqlalchemy import select

from app.db.engine import session_scope
from app.db.models import Audit, FactResult, Subject
from app.db.models.verification import VerificationFact, VerificationPerson
from app.evidence import repository as evidence
from app.evidence.schemas import EntryKind
from app.nulls.calibrate import Calibrator, pool_roles, uncalibrated_reason
from app.nulls.config import subject_lookalikes, subject_reader
from app.settings import get_settings
from app.subjects import repository as subjects
from app.subjects.schemas import SubjectAuditOptions
from app.verification import repository
from app.verification.schemas import FactStatus, PersonRole, VerificationStored
from core.measures.null import FactStat, Rate, fact_stat, pool_statistic
from core.measures.paired import discordant_pairs, mcnemar_exact
from core.measures.wikimem import generic_subject
from workers.jobs.common import JobContext, NextStep, run_audit_job
from workers.jobs.subject import CanaryPlan, PropertyPlan, _plan, _relax_near_duplicates, _score_all, canary_outcome
from workers.jobs.subject import _pairs as subject_pairs
from workers.lm.base import Scorer
from workers.lm.registry import ModelLoadError, load_directory, resolve_spec

PEOPLE_PER_STEP = 20
# a step that waits for a null sleeps this long before going back to the queue: the null's chunks take turns with it
# on the lane, and each sleep delays them
WAIT_SECONDS = 0.5
NOT_BEFORE = "not retrievable on the before model (p > max_p): nothing to remove"
NO_BEFORE = "the before audit's result is gone (erased or deleted)"
NO_TEXTS = (
    "the relearned people have no facts outside the forget set to fine-tune on: give relearning.texts = forget_set"
    " (their forget-set facts) or other people"
)
NO_RELEARNING = (
    "the after model is not a transformers directory the service can train (a served, GGUF or hub model): no"
    " relearning probe"
)


def run(audit_id: str) -> None:
    run_audit_job(audit_id, "verification", VerificationStored, _verify)


def _verify(ctx: JobContext[VerificationStored]) -> dict[str, Any]:
    with session_scope() as s:
        people = repository.people(s, ctx.audit_id)
        todo = [p.id for p in people if not p.scored]
        total = len(people)
    after = ctx.scorer()  # every step: its fingerprint judges the after side, and goes into the provenance
    if todo:
        before = ctx.scorer(ctx.options.before) if ctx.options.held_out else None
        for n, person_id in enumerate(todo[:PEOPLE_PER_STEP]):
            _score_person(ctx, person_id, after, before)
            ctx.progress(total - len(todo) + n + 1, total, force=True)
        if len(todo) > PEOPLE_PER_STEP:
            raise NextStep
    if ctx.options.relearning is not None:
        _relearning_probe(ctx)
    with session_scope() as s:
        audit = s.get(Audit, ctx.audit_id)
        calibrator = Calibrator(s, max_p=ctx.options.max_p)
        if _waiting(s, calibrator, audit, after.fingerprint):
            ctx.check_cancelled()
            time.sleep(WAIT_SECONDS)
            raise NextStep
        summary = _judge(s, calibrator, audit, ctx.options, after.fingerprint)
    ctx.progress(total, total, force=True)
    return summary


# -- scoring -----------------------------------------------------------------------------------------------------


@dataclass
class _BeforePlan:
    """A person's before audit, ready to redo: the subject's name, per property the plan with its stored
    counterfactual draws (contextualized canaries apart, in ``context``), the stored results, options and audit."""

    name: str = ""
    plans: list[PropertyPlan] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    options: SubjectAuditOptions = field(default_factory=SubjectAuditOptions)
    audit: Audit | None = None
    context: dict[str, CanaryPlan] = field(default_factory=dict)  # per property, when the before audit had them


def _person_plans(s, person: VerificationPerson) -> _BeforePlan:  # noqa: ANN001
    """The before audit's plan, exactly: its options, and per property its stored counterfactual draws; its
    contextualized canaries (``options.context``) apart, for the context probe."""
    before = s.get(Audit, person.before_audit_id) if person.before_audit_id else None
    subject = s.get(Subject, person.subject_id)
    if before is None or subject is None:
        return _BeforePlan(audit=before)
    out = _BeforePlan(name=subject.name, options=SubjectAuditOptions.model_validate(before.options or {}), audit=before)
    out.results = {r.property_id: r for r in subjects.results_for_audit(s, before.id, with_candidates=False)}
    for plan in _plan(subject, out.options):
        if plan.prop.pid not in out.results:
            continue
        result = out.results[plan.prop.pid]
        plan.counterfactuals = [cf.value for cf in sorted(result.counterfactuals, key=lambda cf: cf.position)]
        out.context.update((plan.prop.pid, c) for c in plan.canaries if c.kind == "context")
        plan.canaries = [c for c in plan.canaries if c.kind != "context"]
        out.plans.append(plan)
    return out


def _held_out(plan: PropertyPlan, exposed: list[int] | None, n: int) -> list[CanaryPlan]:
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


def _outcomes(plan: PropertyPlan, canaries: list[CanaryPlan], name: str, nll: dict[str, float], alpha: float) -> list:
    return [canary_outcome(plan, c, name, nll, alpha)[0] for c in canaries]


def _pairs(plans: list[PropertyPlan], canaries: dict[str, list[CanaryPlan]], name: str) -> list[tuple[str, str]]:
    """Every sentence pair of these canaries, as the subject job scores them."""
    return [p for plan in plans for c in canaries[plan.prop.pid] for row in subject_pairs(plan, c, name) for p in row]


def _stat(plan: PropertyPlan, outcomes: list) -> dict[str, Any]:
    """The fact's statistics, and where it has values in and out of the pool its pool values' own (``pool``), as the
    calibrator judges a stored result (app.nulls.calibrate.pool_judgment)."""
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


def _score_person(ctx: JobContext[VerificationStored], person_id: int, after: Scorer, before: Scorer | None) -> None:
    opts = ctx.options
    with session_scope() as s:
        person = s.get(VerificationPerson, person_id)
        b = _person_plans(s, person)
        name, plans, results, options, context = b.name, b.plans, b.results, b.options, b.context
        exposed, targets, role = dict(person.exposed or {}), set(person.targets or []), person.role
    if options.near_duplicates and plans:
        _relax_near_duplicates(plans, options.near_duplicate_threshold, options.near_duplicate_scope)
    audited = {p.prop.pid: p.canaries for p in plans}
    held = {p.prop.pid: _held_out(p, exposed.get(p.prop.pid), opts.held_out_templates) for p in plans}
    probed = {k: audited[k] + held[k] + ([context[k]] if k in context else []) for k in audited}
    after_nll = _score_all(ctx, _pairs(plans, probed, name), scorer=after)[0]
    before_nll = _score_all(ctx, _pairs(plans, held, name), scorer=before)[0] if before is not None else {}
    rows = []
    for plan in plans:
        pid = plan.prop.pid
        result = results[pid]
        before_t = {c.template_index: bool(c.memorized) for c in result.canaries if c.kind != "context"}
        after_out = _outcomes(plan, audited[pid], name, after_nll, options.alpha)
        idx = [c.template_index for c in audited[pid]]
        detail: dict[str, Any] = {
            "templates": idx,
            "before_templates": [before_t.get(i, False) for i in idx],
            "after_templates": [o.memorized for o in after_out],
            "after_stat": _stat(plan, after_out),
            "candidates": len(plan.candidates),
            "truths": sum(plan.truth_mask),
        }
        if before is not None and held[pid]:
            detail["held_out_raw"] = {
                "templates": [c.template_index for c in held[pid]],
                "before": [o.memorized for o in _outcomes(plan, held[pid], name, before_nll, options.alpha)],
                "after": [o.memorized for o in _outcomes(plan, held[pid], name, after_nll, options.alpha)],
            }
        before_context = next((c for c in result.canaries if c.kind == "context"), None)
        if pid in context and before_context is not None:
            (out,) = _outcomes(plan, [context[pid]], name, after_nll, options.alpha)
            detail["context_raw"] = {"before": bool(before_context.memorized), "after": bool(out.memorized)}
        is_target = role == PersonRole.FORGOTTEN and pid in targets
        rows.append((pid, is_target, detail))
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
        person = s.get(VerificationPerson, person_id)
        person.scored = True


def _trainable(model: str) -> Path | None:
    """The after model's transformers directory, if the service can fine-tune it (None: it cannot)."""
    try:
        spec = resolve_spec(model, get_settings())
    except ModelLoadError:
        return None
    if spec.backend != "hf" or not spec.path or spec.gguf_file:
        return None
    directory = Path(spec.path).expanduser()
    return directory if (directory / "config.json").is_file() else None


def _unavailable(people: list[VerificationPerson], reason: str) -> None:
    for p in people:
        p.summary = {**(p.summary or {}), "relearning": "unavailable", "relearning_reason": reason}


def _relearning_texts(s, people: list[VerificationPerson], source: str) -> tuple[list[str], list[str]]:  # noqa: ANN001
    """The fine-tuning texts: the relearned people's facts outside the forget set (``other_facts``) or in it
    (``forget_set``), every true value in each template the verification audits; and the relearned people's names
    (scope ``subject`` fine-tunes their name tokens' rows)."""
    texts, names = [], []
    for p in people:
        if not p.relearned:
            continue
        planned = _person_plans(s, p)
        name, plans = planned.name, planned.plans
        names.append(name)
        for plan in plans:
            if (plan.prop.pid in (p.targets or [])) == (source == "forget_set"):
                for c in plan.canaries:
                    texts += [plan.prop.render(c.template_index, name, v) for v in plan.ground_truths]
    return texts, names


def _relearning_probe(ctx: JobContext[VerificationStored]) -> None:
    """Fine-tune the after model on texts of the relearned people (their other facts, or their forget-set facts),
    then audit every forgotten person's forget-set facts on it again. Once per verification."""
    opts = ctx.options.relearning or {}
    with session_scope() as s:
        people = [p for p in repository.people(s, ctx.audit_id) if p.role == PersonRole.FORGOTTEN]
        if all((p.summary or {}).get("relearning") for p in people):
            return
        directory = _trainable(ctx.model)
        if directory is None:
            _unavailable(people, NO_RELEARNING)
            return
        texts, names = _relearning_texts(s, people, str(opts.get("texts", "other_facts")))
        if not texts:
            _unavailable(people, NO_TEXTS)
            return
        ids = [p.id for p in people]
    from workers.unlearning.relearn import relearn  # torch: imported where the probe runs

    with tempfile.TemporaryDirectory(prefix="memaudit-relearn-") as tmp:
        steps, scope = int(opts.get("steps", 20)), str(opts.get("scope", "all"))
        relearn(directory, texts, Path(tmp) / "model", steps=steps, lr=opts.get("lr"), scope=scope, subjects=names)
        ctx.check_cancelled()
        scorer = load_directory(f"{ctx.model} (relearned)", Path(tmp) / "model")
        for person_id in ids:
            _score_relearned(ctx, person_id, scorer)
        del scorer


def _score_relearned(ctx: JobContext[VerificationStored], person_id: int, scorer: Scorer) -> None:
    with session_scope() as s:
        person = s.get(VerificationPerson, person_id)
        planned = _person_plans(s, person)
        name, options = planned.name, planned.options
        plans = [p for p in planned.plans if p.prop.pid in (person.targets or [])]
    if options.near_duplicates and plans:
        _relax_near_duplicates(plans, options.near_duplicate_threshold, options.near_duplicate_scope)
    nll = _score_all(ctx, _pairs(plans, {p.prop.pid: p.canaries for p in plans}, name), scorer=scorer)[0]
    found = {}
    for plan in plans:
        out = _outcomes(plan, plan.canaries, name, nll, options.alpha)
        found[plan.prop.pid] = {"templates": [o.memorized for o in out], "stat": _stat(plan, out)}
    with session_scope() as s:
        person = s.get(VerificationPerson, person_id)
        for fact in person.facts:
            if fact.property_id in found:
                fact.detail = {**(fact.detail or {}), "relearn_raw": found[fact.property_id]}
        person.summary = {**(person.summary or {}), "relearning": "scored"}


# -- verdicts ----------------------------------------------------------------------------------------------------


def _after_audit(audit: Audit, before: Audit, fingerprint: str | None) -> Any:
    """The after side as the calibrator reads an audit: the after model, the before audit's configuration."""
    summary = {
        "scoring": {"fingerprint": fingerprint},
        "lookalikes": subject_lookalikes(before.summary, before.options),
        "lookalike_reader": subject_reader(before.summary),  # the before audit's look-alikes are the after side's
    }
    return SimpleNamespace(id=f"{audit.id}:{before.id}", model=audit.model, options=before.options, summary=summary)


def _after_calibration(  # noqa: ANN202
    calibrator: Calibrator, audit: Audit, before: Audit, fingerprint: str | None, pid: str, stat: dict[str, Any]
):
    pool = stat.pop("pool", None)  # a fact in and out of the pool: its pool values' statistic and number
    fact = FactStat(**stat)  # its shape (m true values, in the pool or not) picks the null facts that judge it
    reason = uncalibrated_reason(
        SimpleNamespace(statistic=fact.statistic, in_pool=fact.in_pool, n_values=fact.n_values)
    )
    after = _after_audit(audit, before, fingerprint)
    return calibrator.calibrate(after, pid, fact, reason, (pool[0], pool[1]) if pool else None)  # type: ignore[arg-type]


def _facts(s, audit_id: str) -> list[tuple[VerificationPerson, VerificationFact, Audit | None, Any]]:  # noqa: ANN001
    out = []
    for person in repository.people(s, audit_id):
        before = s.get(Audit, person.before_audit_id) if person.before_audit_id else None
        results = (
            {r.property_id: r for r in subjects.results_for_audit(s, before.id, with_candidates=False)}
            if before
            else {}
        )
        for fact in person.facts:
            out.append((person, fact, before, results.get(fact.property_id)))
    return out


def _waiting(s, calibrator: Calibrator, audit: Audit, fingerprint: str | None) -> bool:  # noqa: ANN001
    """Whether a null a verdict needs is still queued or running (the verdicts wait for it). A step that waits runs
    once per chunk of the null it waits for, so this reads only what the answer needs: each (before audit,
    property) once, the after side first (the null a verification usually waits for), and a null's status, not its
    facts (py-spy: loading every before result and each ready null's facts per wait was 12 % of the verification
    e2e's samples)."""
    pairs: dict[str, set[str]] = {}
    for person in repository.people(s, audit.id):
        if person.before_audit_id:
            pairs.setdefault(person.before_audit_id, set()).update(f.property_id for f in person.facts)
    if not pairs:
        return False
    audited = s.execute(select(FactResult.audit_id, FactResult.property_id).where(FactResult.audit_id.in_(pairs)))
    present: set[tuple[str, str]] = {(a, pid) for a, pid in audited}
    befores = [(b, pids) for b, pids in ((s.get(Audit, a), pids) for a, pids in pairs.items()) if b is not None]
    for side in ("after", "before"):
        for before, pids in befores:
            judged = _after_audit(audit, before, fingerprint) if side == "after" else before
            if any((before.id, pid) in present and calibrator.pending(judged, pid) for pid in sorted(pids)):
                return True
    return False


def status_of(before: Any, after: Any) -> tuple[FactStatus, str | None]:
    """The rule (docs/verification.md): still retrievable when the after model's p <= max_p; removed when the
    before model's was and the after model's is not; inconclusive otherwise, with the reason."""
    if before.p_value is None:
        return FactStatus.INCONCLUSIVE, f"before: {before.message or before.status}"
    if after.p_value is None:
        return FactStatus.INCONCLUSIVE, f"after: {after.message or after.status}"
    if after.memorized:
        return FactStatus.STILL_RETRIEVABLE, None
    if not before.memorized:
        return FactStatus.INCONCLUSIVE, NOT_BEFORE
    return FactStatus.REMOVED, None


def _judge(  # noqa: ANN001
    s, calibrator: Calibrator, audit: Audit, options: VerificationStored, fingerprint: str | None
) -> dict[str, Any]:
    per_person: dict[int, list[VerificationFact]] = {}
    for person, fact, before, result in _facts(s, audit.id):
        per_person.setdefault(person.id, [])
        d = dict(fact.detail or {})
        if before is None or result is None:
            fact.status, fact.reason = FactStatus.INCONCLUSIVE, NO_BEFORE
            per_person[person.id].append(fact)
            continue
        b_cal = calibrator.calibrate_result(before, result, result.canaries)
        a_cal = _after_calibration(calibrator, audit, before, fingerprint, fact.property_id, dict(d["after_stat"]))
        fact.p_before, fact.memorized_before = b_cal.p_value, b_cal.memorized
        fact.p_after, fact.memorized_after = a_cal.p_value, a_cal.memorized
        fact.paired_p = mcnemar_exact(*discordant_pairs(d["before_templates"], d["after_templates"]))
        status, reason = status_of(b_cal, a_cal)
        fact.status, fact.reason = status, reason
        # a template's chance of ranking a true value first when nothing is known: m true values among the candidates
        chance = int(d.get("truths") or 1) / max(int(d.get("candidates") or 1), 1)
        raw = d.get("held_out_raw")
        if raw:
            d["held_out"] = {
                "templates": raw["templates"],
                "before_retrieved": sum(raw["before"]),
                "after_retrieved": sum(raw["after"]),
                "paired_p": mcnemar_exact(*discordant_pairs(raw["before"], raw["after"])),
                "chance": chance,
            }
        raw_context = d.get("context_raw")
        if raw_context:
            d["context"] = {
                "before_retrieved": raw_context["before"],
                "after_retrieved": raw_context["after"],
                "chance": chance,
            }
        relearn = d.get("relearn_raw")
        if relearn:
            r_cal = _after_calibration(calibrator, audit, before, fingerprint, fact.property_id, dict(relearn["stat"]))
            d["relearning"] = {
                "relearned": person.relearned,
                "p_value": r_cal.p_value,
                "came_back": r_cal.memorized,
                "templates_retrieved": sum(relearn["templates"]),
            }
        fact.detail = d
        per_person[person.id].append(fact)
    people = repository.people(s, audit.id)
    summary = _summary(people, options)
    _evidence(s, audit, people, options)
    return summary


def _rate(k: int, n: int) -> dict[str, Any] | None:
    if n == 0:
        return None
    r = Rate.of(k, n)
    return {"rate": r.rate, "k": r.k, "n": r.n, "ci95": [r.low, r.high]}


def _summary(people: list[VerificationPerson], options: VerificationStored) -> dict[str, Any]:
    targets = [f for p in people for f in p.facts if f.target]
    locality = [f for p in people for f in p.facts if not f.target]
    counts = {str(s): sum(f.status == s for f in targets) for s in FactStatus}
    kept = [f for f in locality if f.memorized_before]
    over = [f for f in kept if f.memorized_after is False]
    # the facts' groups: untouched people as given, name neighbours (locality.name_neighbours found them), and the
    # forgotten people's facts outside the forget set
    group = {
        f.id: "forgotten_people_other_facts"
        if p.role == PersonRole.FORGOTTEN
        else "name_neighbours"
        if (p.summary or {}).get("name_neighbour")
        else "locality_people"
        for p in people
        for f in p.facts
    }
    groups = ["locality_people", "forgotten_people_other_facts"]
    if "name_neighbours" in group.values():
        groups.append("name_neighbours")
    b = c = 0
    for f in targets:
        pair = discordant_pairs(
            (f.detail or {}).get("before_templates", []), (f.detail or {}).get("after_templates", [])
        )
        b, c = b + pair[0], c + pair[1]
    held = [(f.detail or {}).get("held_out") for f in targets]
    held = [h for h in held if h]
    summary: dict[str, Any] = {
        "max_p": options.max_p,
        "people": {
            "forgotten": sum(p.role == PersonRole.FORGOTTEN for p in people),
            "locality": len(people) - sum(p.role == PersonRole.FORGOTTEN for p in people),
            "name_neighbours": sum(bool((p.summary or {}).get("name_neighbour")) for p in people),
        },
        "targets": {"facts": len(targets), **counts},
        "removed": _rate(counts[FactStatus.REMOVED], len(targets)),
        "still_retrievable": _rate(counts[FactStatus.STILL_RETRIEVABLE], len(targets)),
        "locality": {
            "facts": len(locality),
            "retrievable_before": len(kept),
            "still_retrievable": _rate(sum(f.status == FactStatus.STILL_RETRIEVABLE for f in kept), len(kept)),
        },
        "over_forgetting": _rate(len(over), len(kept)),
        "over_forgetting_by_group": {
            name: _rate(sum(group[f.id] == name for f in over), sum(group[f.id] == name for f in kept))
            for name in groups
        },
        "paired": {
            "test": "exact McNemar, one-sided, over the templates' rank-1 outcomes",
            "b": b,
            "c": c,
            "p": mcnemar_exact(b, c),
        },
    }
    if held:
        summary["held_out"] = {
            "facts": len(held),
            "templates": sum(len(h["templates"]) for h in held),
            "before_retrieved": sum(h["before_retrieved"] for h in held),
            "after_retrieved": sum(h["after_retrieved"] for h in held),
            "chance": sum(h["chance"] * len(h["templates"]) for h in held)
            / max(sum(len(h["templates"]) for h in held), 1),
        }
    in_context = [(f, f.detail["context"]) for f in targets if (f.detail or {}).get("context")]
    if in_context:
        summary["context"] = {
            "facts": len(in_context),
            "before_retrieved": sum(c["before_retrieved"] for _, c in in_context),
            "after_retrieved": sum(c["after_retrieved"] for _, c in in_context),
            # the leak this probe is for: gone from the bare audit, still given back after the person's other facts
            "removed_but_retrieved": sum(
                f.status == FactStatus.REMOVED and c["after_retrieved"] for f, c in in_context
            ),
            "chance": sum(c["chance"] for _, c in in_context) / len(in_context),
        }
    if options.relearning is not None:
        summary["relearning"] = _relearning_summary(people, targets, options)
    return summary


def _relearning_summary(
    people: list[VerificationPerson], targets: list[VerificationFact], options: VerificationStored
) -> dict[str, Any]:
    forgotten = [p for p in people if p.role == PersonRole.FORGOTTEN]
    for p in forgotten:
        if (p.summary or {}).get("relearning") == "unavailable":
            return {"status": "unavailable", "reason": p.summary.get("relearning_reason") or NO_RELEARNING}
    from workers.unlearning.relearn import default_lr  # torch: the probe ran, on a transformers directory

    opts = options.relearning or {}
    scope = opts.get("scope", "all")
    out: dict[str, Any] = {
        "status": "done",
        "texts": opts.get("texts", "other_facts"),
        "scope": scope,
        "steps": opts.get("steps", 20),
        "lr": opts.get("lr") or default_lr(scope),
    }
    for group, relearned in (("relearned", True), ("others", False)):
        facts = [f for f in targets if (f.detail or {}).get("relearning", {}).get("relearned") is relearned]
        removed = [f for f in facts if f.status == FactStatus.REMOVED]
        back = [f for f in removed if f.detail["relearning"]["came_back"]]
        out[group] = {"removed_facts": len(removed), "came_back": _rate(len(back), len(removed))}
    return out


def _evidence(s, audit: Audit, people: list[VerificationPerson], options: VerificationStored) -> None:  # noqa: ANN001
    """One entry per forgotten person: counts and p-values, never a name or a value (the person's page reads it)."""
    settings = get_settings()
    for p in people:
        if p.role != PersonRole.FORGOTTEN:
            continue
        facts = [f for f in p.facts if f.target]
        counts = {str(st): sum(f.status == st for f in facts) for st in FactStatus}
        body = {
            "verification_audit_id": audit.id,
            "before_model": options.before,
            "after_model": audit.model,
            "before_audit_id": p.before_audit_id,
            # the forget-set export verified (people.export_sha256): its entry's seq, so the chain links the two
            "export_seq": options.export["seq"] if options.export else None,
            "facts": len(facts),
            **{k.replace(" ", "_"): v for k, v in counts.items()},
            "forgotten": bool(facts) and counts[FactStatus.REMOVED] == len(facts),
            "properties": {
                f.property_id: {"status": f.status, "p_before": f.p_before, "p_after": f.p_after} for f in facts
            },
        }
        evidence.append(
            s,
            settings,
            EntryKind.VERIFICATION,
            principal=f"key:{audit.owner_key_id}" if audit.owner_key_id is not None else "service",
            body=body,
            subject_id=p.subject_id,
            audit_id=audit.id,
        )
