"""Cohort statistics (WikiMem's M̄ strict/lenient, z̄* over rank-1 templates, H_{M=0}) over a set of finished
subject audits — one audit, one subject — with the same numbers from the matching nulls beside them."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audits.repository import visible
from app.auth.keys import Principal
from app.db.models import Audit, FactResult
from app.db.models.audit import AuditStatus
from app.errors import InvalidInput, NotFound
from app.nulls.calibrate import Calibrator, Resolved, null_people, result_stat
from app.nulls.misattribution import MisattributionJudge
from app.nulls.schemas import CalibrationInfo, CohortNumbers, CohortStatsRead
from app.policies import DEFAULT
from app.subjects.repository import results_for_audit
from core.measures.cohort import CohortStats, cohort_stats, null_cohort_stats
from core.measures.null import FactStat

MAX_COHORT = 5000  # audits per request; a larger cohort is read in parts


def _audits(session: Session, principal: Principal, model: str | None, audit_ids: list[str]) -> list[Audit]:
    if not audit_ids:
        if model is None:
            raise InvalidInput("model", "give a model (all its finished subject audits) or audit_id values")
        stmt = select(Audit).where(Audit.model == model, Audit.kind == "subject", Audit.status == AuditStatus.SUCCEEDED)
        found = list(session.scalars(visible(stmt.order_by(Audit.created_at).limit(MAX_COHORT + 1), principal)))
        if len(found) > MAX_COHORT:
            raise InvalidInput("audit_id", f"more than {MAX_COHORT} audits match; list the audits of the cohort")
        return found
    if len(audit_ids) > MAX_COHORT:
        raise InvalidInput("audit_id", f"{len(audit_ids)} audits given; at most {MAX_COHORT} per request")
    out = []
    for i, audit_id in enumerate(dict.fromkeys(audit_ids)):
        audit = session.scalar(visible(select(Audit).where(Audit.id == audit_id), principal))
        if audit is None:
            raise NotFound(f"audit_id[{i}]: no audit with id {audit_id!r}")
        if audit.kind != "subject" or audit.status != "succeeded":
            raise InvalidInput(f"audit_id[{i}]", "a cohort is made of succeeded subject audits; remove this one")
        if model is not None and audit.model != model:
            raise InvalidInput(f"audit_id[{i}]", "this audit is of another model than `model`; one model per cohort")
        out.append(audit)
    if len({a.model for a in out}) > 1:
        raise InvalidInput("audit_id", "the audits are of several models; give the audits of one model")
    return out


def _numbers(stats: CohortStats, memorized: float | None, misattributed: float | None = None) -> CohortNumbers:
    return CohortNumbers(**dataclasses.asdict(stats), memorized=memorized, misattributed=misattributed)


def read_cohort_stats(
    session: Session, principal: Principal, model: str | None, audit_ids: list[str]
) -> CohortStatsRead:
    return cohort_of(session, _audits(session, principal, model, audit_ids))


def cohort_of(session: Session, audits: list[Audit]) -> CohortStatsRead:
    """The statistics of these succeeded subject audits of one model (at most MAX_COHORT; the caller checks)."""
    calibrator = Calibrator(session)
    judge = MisattributionJudge(calibrator)
    subjects: list[list[FactStat]] = []
    keys: list[list[str]] = []
    resolved: dict[str, Resolved] = {}
    selected, wrong, per_property = [], [], defaultdict(lambda: defaultdict(float))
    for audit in audits:
        results = results_for_audit(session, audit.id, with_candidates=False)
        stats = [result_stat(r, r.canaries) for r in results]
        subjects.append(stats)
        keys.append([])
        for r, stat in zip(results, stats, strict=True):
            found = calibrator.resolve(audit, r.property_id)
            key = f"{r.property_id}|{calibrator.key(audit, r.property_id)}"
            keys[-1].append(key)
            resolved[key] = found
            verdict = calibrator.calibrate_result(audit, r, r.canaries).memorized
            selected.append(verdict)
            wrong.append(_misattributed(judge, audit, r))
            _tally(per_property[r.property_id], stat, verdict, found, wrong[-1])
    ready = all(found.null is not None for found in resolved.values())
    judged = [w for w in wrong if w is not None]
    cohort = _numbers(cohort_stats(subjects), _share(selected), sum(judged) / len(judged) if judged else None)
    null = None
    if ready and resolved:
        facts_by_key = {k: found.null.facts for k, found in resolved.items()}
        n = null_cohort_stats(keys, facts_by_key, null_people(resolved))
        fpr = [resolved[k].rates["pvalue"].rate for ks in keys for k in ks]
        null = _numbers(n, sum(fpr) / len(fpr) if fpr else None)
    info = CalibrationInfo(policy=DEFAULT, max_p=calibrator.max_p, nulls=[f.ref() for f in resolved.values()])
    return CohortStatsRead(
        audits=[a.id for a in audits],
        cohort=cohort,
        null=null,
        per_property={pid: _finish(t) for pid, t in sorted(per_property.items())},
        calibration=info,
    )


def _share(verdicts: list[bool | None]) -> float | None:
    known = [v for v in verdicts if v is not None]
    return sum(known) / len(known) if known and len(known) == len(verdicts) else None


def _misattributed(judge: MisattributionJudge, audit: Audit, result: FactResult) -> bool | None:
    """The fact's misattribution verdict at p <= 0.01 (None: no p-value)."""
    m = judge.judge(audit, result)
    return None if m is None or m.p_value is None else bool(m.misattributed)


def _tally(
    t: dict[str, float], stat: FactStat, verdict: bool | None, found: Resolved, wrong: bool | None = None
) -> None:
    t["facts"] += 1
    t["misattributed"] += bool(wrong)
    t["misattribution_judged"] += wrong is not None
    t["mean_share"] += stat.share
    t["strict"] += stat.strict
    t["lenient"] += stat.lenient
    t["memorized"] += bool(verdict)
    t["pending"] += verdict is None
    if found.null is not None:
        t["null_facts"] += 1
        t["null_lenient"] += found.rates["lenient"].rate
        t["null_strict"] += found.rates["strict"].rate
        t["null_pvalue"] += found.rates["pvalue"].rate


def _finish(t: dict[str, float]) -> dict[str, float | int | None]:
    n, m = int(t["facts"]), int(t["null_facts"])
    out: dict[str, float | int | None] = {"facts": n}
    for name in ("mean_share", "strict", "lenient"):
        out[name] = t[name] / n
    out["memorized"] = t["memorized"] / n if not t["pending"] else None
    judged = int(t["misattribution_judged"])
    out["misattributed"] = t["misattributed"] / judged if judged else None
    for name in ("null_lenient", "null_strict", "null_pvalue"):
        out[name] = t[name] / m if m else None
    return out
