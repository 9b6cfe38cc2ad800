"""HTTP endpoints for dynamics audit results: the per-string table (streamed JSONL/CSV) and plot-ready series."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from app.db.models.audit import AuditStatus
from app.deps import CurrentPrincipal, SessionDep, SettingsDep
from app.dynamics import service
from app.dynamics.schemas import DynamicsSeries
from app.errors import InvalidInput, NotFound
from app.streaming import MEDIA_TYPES, csv_lines, download, jsonl_lines
from app.validation import LIMIT_KEY

router = APIRouter(prefix="/audits", tags=["dynamics"])
Measure = Literal["recollection", "counterfactual", "contextual"]
Tau = Annotated[
    float | None,
    Query(gt=0.0, allow_inf_nan=False, description="Recompute with this recollection threshold (nats/token)"),
]
Margin = Annotated[
    float | None, Query(ge=0.0, allow_inf_nan=False, description="Recompute with this counterfactual margin")
]


@router.get("/{audit_id}/strings", response_class=StreamingResponse)
def dynamics_strings(
    audit_id: str,
    session: SessionDep,
    principal: CurrentPrincipal,
    format: Literal["jsonl", "csv"] = "jsonl",
    measure: Measure | None = None,
    flagged: bool | None = None,
    tau: Tau = None,
    margin: Margin = None,
    text: bool = True,
) -> StreamingResponse:
    """Per string (streamed): id, text, count and frequency, fold, each measure's flag (at the last epoch) and
    onset epoch, the optimal contextual threshold and both loss curves. `measure=contextual&flagged=true` lists
    the strings contextual memorization flags; `text=false` leaves the strings' text out."""
    if (measure is None) != (flagged is None):
        raise InvalidInput("flagged", "measure and flagged go together (e.g. measure=contextual&flagged=true)")
    audit, link = service.dynamics_audit(session, principal, audit_id)
    if not link.epochs or (link.source != "imported" and audit.status != AuditStatus.SUCCEEDED):
        raise NotFound(f"this audit has no results yet (status {audit.status})")
    tau_, margin_ = service.thresholds(audit, tau, margin)
    rows = service.result_rows(audit.id, list(link.epochs), tau_, margin_, measure, flagged, text)
    body = jsonl_lines(rows) if format == "jsonl" else csv_lines(map(service.csv_row, rows), service.CSV_FIELDS)
    return download(body, MEDIA_TYPES[format], f"dynamics-{audit_id}.{format}")


@router.get("/{audit_id}/series", response_model=DynamicsSeries)
def dynamics_series(
    audit_id: str,
    session: SessionDep,
    settings: SettingsDep,
    principal: CurrentPrincipal,
    string_id: Annotated[list[str] | None, Query(description="Strings whose curves to return (repeatable)")] = None,
    limit: Annotated[
        int,
        Query(
            ge=0,
            description="Without string_id: the first strings (most frequent)",
            json_schema_extra={LIMIT_KEY: {"maximum": "max_page_size"}},
        ),
    ] = 5,
    tau: Tau = None,
    margin: Margin = None,
) -> DynamicsSeries:
    """Plot-ready: share memorized per epoch for each measure, mean losses, the epoch of best held-out loss, and
    selected strings' loss curves with the three thresholds (tau, the string's contextual threshold, the margin)."""
    if limit > settings.max_page_size or (string_id and len(string_id) > settings.max_page_size):
        raise InvalidInput("limit", f"at most {settings.max_page_size} strings per request")
    audit, link = service.dynamics_audit(session, principal, audit_id)
    return service.series(session, audit, link, string_id, limit, tau, margin)
