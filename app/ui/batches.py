"""Dashboard pages of batches (cohorts of subject audits): the list, and one batch with its progress, its cohort
report (GET /batches/{id}/report, as tables and a chart: M̄ and the lenient rate per property beside the null's) and
its people with their verdicts, each linked to their audit. Visibility and numbers are the API's own."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from app.batches import repository, service
from app.batches.report import read_report
from app.db.vocabulary import ACTIVE_STATUSES
from app.deps import SessionDep
from app.ui import results, verdicts
from app.ui.web import Signed, UiRoute, render
from core.catalog import load_catalog

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
BATCHES_PER_PAGE = 25
PEOPLE_PER_PAGE = 50


@router.get("/batches", response_class=HTMLResponse)
def batches_page(
    request: Request, session: SessionDep, ui: Signed, page: Annotated[int, Query(ge=1, le=100_000)] = 1
) -> HTMLResponse:
    rows, total = repository.page_visible(session, ui.principal, page, BATCHES_PER_PAGE)
    reads = [service.batch_read(session, b) for b in rows]
    pages = max(1, -(-total // BATCHES_PER_PAGE))
    return render(request, "batches.html", batches=reads, total=total, page=page, pages=pages)


def property_label(pid: str) -> str:
    catalog = load_catalog()
    return catalog.get(pid).label if pid in catalog else pid


def _chart_rows(cohort: Any) -> list[dict[str, Any]]:
    """Per property (and all facts first): M̄ and the lenient rate of the cohort beside the null's."""
    if cohort is None:
        return []
    c, n = cohort.cohort, cohort.null
    rows = [
        {
            "group": "all facts",
            "mean": c.mean_memorization,
            "null_mean": n.mean_memorization if n else None,
            "lenient": c.lenient,
            "null_lenient": n.lenient if n else None,
            "memorized": c.memorized,
            "null_memorized": n.memorized if n else None,
        }
    ]
    for pid, t in (cohort.per_property or {}).items():
        rows.append(
            {
                "group": f"{property_label(pid)} ({pid})",
                "mean": t.get("mean_share"),
                "null_mean": t.get("null_mean_share"),  # not in today's report: the bar is left out
                "lenient": t.get("lenient"),
                "null_lenient": t.get("null_lenient"),
                "memorized": t.get("memorized"),
                "null_memorized": t.get("null_pvalue"),
            }
        )
    return rows


@router.get("/batches/{batch_id}", response_class=HTMLResponse)
def batch_page(
    batch_id: str,
    request: Request,
    session: SessionDep,
    ui: Signed,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> HTMLResponse:
    batch = service.get_batch(session, ui.principal, batch_id)
    read = service.batch_read(session, batch)
    report = read_report(session, batch)
    people, total = repository.page_audits(session, ui.principal, batch.id, None, page, PEOPLE_PER_PAGE)
    counts = verdicts.counts_for(session, people)
    session.commit()
    return render(
        request,
        "batch.html",
        batch=read,
        report=report,
        charts={model: _chart_rows(cohort) for model, cohort in report.cohorts.items()},
        people=people,
        names=results.subject_names(session, people),
        counts=counts,
        total=total,
        page=page,
        pages=max(1, -(-total // PEOPLE_PER_PAGE)),
        eta=verdicts.duration(read.eta_seconds) if read.eta_seconds else None,
        active=read.status in ACTIVE_STATUSES,
    )
