"""Verification job (issue 26): redo each person's subject audit on the after (unlearned) model with the before
audit's stored configuration — its templates, its counterfactual draws (read from the stored result), look-alikes
and α — then judge every fact against each model's own null, pair the template outcomes (exact McNemar), and run
the probes: held-out templates (those the forget set did not expose, on both models), contextualized canaries (when
the before audit had them: its other known facts, then the baseline, redone on the after model) and relearning (a
few fine-tuning steps of the after model on part of the forget set, then the forgotten facts audited again).

Works in steps (``NextStep``): PEOPLE_PER_STEP people per job, then the relearning probe; then, if a null the
verdicts need is still queued or running, the audit waits (``Waiting``: back to `queued`, its next job parked until
the last of those nulls ends and wakes it), then the verdicts, the summary and one evidence entry per forgotten
person. Stores ids, p-values and template outcomes only; names and values stay in the
subject tables (erasing a subject deletes its rows here)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import SimpleNamespace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.engine import session_scope
from app.db.models import Audit, FactResult
from app.db.models.verification import VerificationFact, VerificationPerson
from app.nulls.calibrate import Calibrator, uncalibrated_reason
from app.nulls.config import subject_lookalikes, subject_reader
from app.subjects import repository as subjects
from app.verification import repository
from app.verification.schemas import FactStatus, VerificationStored
from core.measures.null import FactStat
from core.measures.paired import discordant_pairs, mcnemar_exact
from workers.jobs.common import JobContext, NextStep, Waiting, run_audit_job
from workers.jobs.verification_people import score_person
from workers.jobs.verification_relearning import relearning_probe
from workers.jobs.verification_summary import record_evidence, summarize

PEOPLE_PER_STEP = 20
NOT_BEFORE = "not retrievable on the before model (p > max_p): nothing to remove"
NO_BEFORE = "the before audit's result is gone (erased or deleted)"


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
            score_person(ctx, person_id, after, before)
            ctx.progress(total - len(todo) + n + 1, total, force=True)
        if len(todo) > PEOPLE_PER_STEP:
            raise NextStep
    if ctx.options.relearning is not None:
        relearning_probe(ctx)
    with session_scope() as s:
        audit = s.get(Audit, ctx.audit_id)
        calibrator = Calibrator(s, max_p=ctx.options.max_p)
        awaited = _waiting(s, calibrator, audit, after.fingerprint)
        if awaited:
            raise Waiting(awaited)
        summary = _judge(s, calibrator, audit, ctx.options, after.fingerprint)
    ctx.progress(total, total, force=True)
    return summary


def _after_audit(audit: Audit, before: Audit, fingerprint: str | None) -> Any:
    """The after side as the calibrator reads an audit: the after model, the before audit's configuration."""
    summary = {
        "scoring": {"fingerprint": fingerprint},
        "lookalikes": subject_lookalikes(before.summary, before.options),
        "lookalike_reader": subject_reader(before.summary),  # the before audit's look-alikes are the after side's
    }
    return SimpleNamespace(id=f"{audit.id}:{before.id}", model=audit.model, options=before.options, summary=summary)


def _after_calibration(
    calibrator: Calibrator, audit: Audit, before: Audit, fingerprint: str | None, pid: str, stat: dict[str, Any]
):
    pool = stat.pop("pool", None)  # a fact in and out of the pool: its pool values' statistic and number
    fact = FactStat(**stat)  # its shape (m true values, in the pool or not) picks the null facts that judge it
    reason = uncalibrated_reason(
        SimpleNamespace(statistic=fact.statistic, in_pool=fact.in_pool, n_values=fact.n_values)
    )
    after = _after_audit(audit, before, fingerprint)
    return calibrator.calibrate(after, pid, fact, reason, (pool[0], pool[1]) if pool else None)  # type: ignore[arg-type]


def _facts(s, audit_id: str) -> list[tuple[VerificationPerson, VerificationFact, Audit | None, Any]]:
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


def _waiting(s, calibrator: Calibrator, audit: Audit, fingerprint: str | None) -> list[str]:
    """The null audits, queued or running, that a verdict needs (the verdicts wait for them). Reads only what the
    answer needs: each (before audit, property) once, and a null's status, not its facts."""
    pairs: dict[str, set[str]] = {}
    for person in repository.people(s, audit.id):
        if person.before_audit_id:
            pairs.setdefault(person.before_audit_id, set()).update(f.property_id for f in person.facts)
    if not pairs:
        return []
    audited = s.execute(select(FactResult.audit_id, FactResult.property_id).where(FactResult.audit_id.in_(pairs)))
    present: set[tuple[str, str]] = {(a, pid) for a, pid in audited}
    befores = [(b, pids) for b, pids in ((s.get(Audit, a), pids) for a, pids in pairs.items()) if b is not None]
    awaited: set[str] = set()
    for before, pids in befores:
        for judged in (_after_audit(audit, before, fingerprint), before):
            awaited.update(
                null for pid in pids if (before.id, pid) in present and (null := calibrator.pending(judged, pid))
            )
    return sorted(awaited)


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


def _judge(
    s: Session, calibrator: Calibrator, audit: Audit, options: VerificationStored, fingerprint: str | None
) -> dict[str, Any]:
    """Every fact's verdict on each side, its status and its probes; then the summary and the evidence entries."""
    for person, fact, before, result in _facts(s, audit.id):
        if before is None or result is None:
            fact.status, fact.reason = FactStatus.INCONCLUSIVE, NO_BEFORE
            continue
        b_cal = calibrator.calibrate_result(before, result, result.canaries)
        after = partial(_after_calibration, calibrator, audit, before, fingerprint, fact.property_id)
        _judge_fact(fact, b_cal, after, person.relearned)
    people = repository.people(s, audit.id)
    summary = summarize(people, options)
    record_evidence(s, audit, people, options)
    return summary


def _judge_fact(fact: VerificationFact, b_cal: Any, after: Callable[[dict[str, Any]], Any], relearned: bool) -> None:
    """One fact: the after side judged by ``after`` (its statistic -> calibration), the status, the paired test, and
    the probes' results from their raw outcomes."""
    d = dict(fact.detail or {})
    a_cal = after(dict(d["after_stat"]))
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
        r_cal = after(dict(relearn["stat"]))
        d["relearning"] = {
            "relearned": relearned,
            "p_value": r_cal.p_value,
            "came_back": r_cal.memorized,
            "templates_retrieved": sum(relearn["templates"]),
        }
    fact.detail = d
