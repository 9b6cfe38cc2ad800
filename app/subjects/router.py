"""HTTP endpoints of subject audits and subjects: parse, call the service, map results; and the cohort statistics
over subject audits (documented among the null calibration's endpoints, beside the nulls they are compared with)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import CurrentPrincipal, SessionDep, SettingsDep, Submitter
from app.nulls.schemas import CohortStatsRead
from app.privacy import access_log
from app.subjects import erasure, service
from app.subjects.cohort import read_cohort_stats
from app.subjects.schemas import Detail, FactsPage
from app.validation import Id

router = APIRouter(tags=["subjects"])
cohort_router = APIRouter(tags=["null calibration"])


@router.get("/audits/{audit_id}/facts", response_model=FactsPage, tags=["audits"])
def get_facts(audit_id: str, session: SessionDep, principal: CurrentPrincipal, detail: Detail = "summary") -> FactsPage:
    """Per fact: rank per template, share of templates at rank 1, strict/lenient, z*. With
    `detail=candidates`, every candidate's sentences, NLLs and score, so the ranking can be recomputed."""
    facts = service.read_facts(session, principal, audit_id, detail)
    access_log.record(session, principal, "read_facts", subject_id=facts.subject_id, audit_id=audit_id)
    session.commit()  # logged before the data leaves
    return facts


@router.delete("/subjects/{subject_id}")
def erase_subject(subject_id: Id, session: SessionDep, settings: SettingsDep, principal: Submitter) -> dict[str, int]:
    """Erase the service's own copy of a subject's personal data: the subject, facts, audits, results, cached
    sentence scores that name them, the audits' idempotency keys and job records (README "Erasure")."""
    return erasure.erase(session, settings, principal, subject_id)


@cohort_router.get("/cohort-stats", response_model=CohortStatsRead)
def cohort_stats(
    session: SessionDep,
    principal: CurrentPrincipal,
    model: str | None = None,
    audit_id: Annotated[list[str] | None, Query(description="Subject audits of the cohort (repeat)")] = None,
) -> CohortStatsRead:
    """WikiMem's cohort statistics over finished subject audits (the listed ones, or every one of `model` you
    can see): M̄, strict and lenient rates, z̄* over rank-1 templates, H_{M=0} (share of subjects with nothing
    memorized), the share selected by the default policy, and the same numbers from the matching nulls."""
    return read_cohort_stats(session, principal, model, audit_id or [])
