"""HTTP endpoints of capacity audits: the grid, plot-ready series, text-mode results, and the scaling law."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.audits.service import visible_audit_of_kind
from app.capacity import series as series_service
from app.capacity import service
from app.capacity.schemas import CapacityAuditOptions, CapacityGridRead, CapacitySeries, Prediction, TextResultsRead
from app.db.models import Audit
from app.deps import CurrentPrincipal, SessionDep
from app.errors import NotFound

router = APIRouter(tags=["capacity"])


def _capacity_audit(session: SessionDep, principal: CurrentPrincipal, audit_id: str, mode: str) -> Audit:
    audit = visible_audit_of_kind(session, principal, audit_id, "capacity")
    if CapacityAuditOptions.model_validate(audit.options).mode != mode:
        raise NotFound(f"this audit is not a {mode}-mode capacity audit; its links name its result pages")
    return audit


@router.get("/audits/{audit_id}/capacity", response_model=CapacityGridRead)
def get_grid(audit_id: str, session: SessionDep, principal: CurrentPrincipal) -> CapacityGridRead:
    """Every cell of the grid with every recorded number, and capacity (max over N) per architecture."""
    return service.grid_read(session, _capacity_audit(session, principal, audit_id, "uniform"))


@router.get("/audits/{audit_id}/capacity/series", response_model=CapacitySeries)
def get_series(audit_id: str, session: SessionDep, principal: CurrentPrincipal) -> CapacitySeries:
    """Plot-ready: memorized bits vs N per architecture (with the plateau), bits/param vs parameters,
    training curves. `memaudit capacity plot` draws them."""
    return series_service.series(session, _capacity_audit(session, principal, audit_id, "uniform"))


@router.get("/audits/{audit_id}/capacity/texts", response_model=TextResultsRead)
def get_texts(
    audit_id: str,
    session: SessionDep,
    principal: CurrentPrincipal,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> TextResultsRead:
    """Text mode: the most memorized samples first, with mem_U in bits and TF-IDF rarity."""
    return service.text_results(session, _capacity_audit(session, principal, audit_id, "text"), limit)


@router.get("/capacity/predict", response_model=Prediction)
def predict(
    principal: CurrentPrincipal,
    params: Annotated[float, Query(ge=1, le=1e15, allow_inf_nan=False, description="model parameters P")],
    samples: Annotated[float, Query(ge=1, le=1e18, allow_inf_nan=False, description="training-set size N (samples)")],
) -> Prediction:
    """Loss-based membership-inference F1 predicted by Morris et al.'s scaling law,
    F1 = ½ (1 + c1 σ(c2 (x + c3))), x = 1000 · N / P (docs/capacity.md explains x)."""
    return service.predict(params, samples)
