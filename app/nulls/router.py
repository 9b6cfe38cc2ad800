"""HTTP endpoints of null calibration: a null audit's distributions, and cohort statistics."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from app.audits.service import visible_audit_of_kind
from app.deps import CurrentPrincipal, SessionDep
from app.nulls import repository
from app.nulls.cohort import read_cohort_stats
from app.nulls.schemas import CohortStatsRead

router = APIRouter(tags=["null calibration"])
MAX_FACTS_SHOWN = 5000


@router.get("/audits/{audit_id}/null")
def get_null(
    audit_id: str,
    session: SessionDep,
    principal: CurrentPrincipal,
    detail: Literal["summary", "facts"] = "summary",
    limit: Annotated[int, Query(ge=1, le=MAX_FACTS_SHOWN)] = 1000,
) -> dict[str, Any]:
    """A null audit's distributions per property: its configuration, the model fingerprint it ran on, K people,
    the false-positive rate of each policy; with `detail=facts`, the null facts themselves (fictitious people)."""
    audit = visible_audit_of_kind(session, principal, audit_id, "null")
    out = []
    for row in repository.of_audit(session, audit_id):
        item: dict[str, Any] = {
            "property": row.property_id,
            "key": row.key,
            "method": row.method,
            "people": row.people,
            "null_facts": row.n_facts,
            "fingerprint": row.fingerprint,
            "config": row.config,
            "summary": row.summary,
        }
        if detail == "facts":
            item["facts"] = [
                {
                    "person": f.person,
                    "name": f.name,
                    "value": f.value,
                    "assigned": f.assigned,
                    "share": f.share,
                    "strict": f.strict,
                    "lenient": f.lenient,
                    "z_star": f.z_star,
                    "n_templates": f.n_templates,
                    "statistic": f.statistic,
                    "n_values": f.n_values,
                }
                for f in repository.facts(session, row.id, limit)
            ]
        out.append(item)
    return {"audit_id": audit_id, "status": audit.status, "distributions": out}


@router.get("/cohort-stats", response_model=CohortStatsRead)
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
