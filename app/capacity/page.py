"""The capacity audit's section of the dashboard page: memorized bits against N per model (capacity stated only
where the curve has reached its plateau), bits per parameter; in text mode, the most memorized samples."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.capacity import series as capacity_series
from app.capacity import service
from app.capacity.schemas import CapacityAuditOptions
from app.db.models import Audit

TEXTS_SHOWN = 50
PLATEAU_GROWTH = 0.05  # the last step of N added less than 5 % of the bits: a plateau
PLATEAU_ENTROPY = 0.9  # ... and the model holds clearly less than the dataset's entropy (else it holds it all)


def plateau(points: list[Any]) -> bool:
    """The curve stopped rising: its last point adds < 5 % over the previous one and stays below 90 % of the
    dataset's entropy (a model that memorizes its whole dataset has not shown its capacity yet)."""
    if len(points) < 2:
        return False
    last, previous = points[-1], points[-2]
    grew = last.memorized_bits - previous.memorized_bits
    saturated = last.entropy_bits and last.memorized_bits >= PLATEAU_ENTROPY * last.entropy_bits
    return grew <= PLATEAU_GROWTH * max(abs(last.memorized_bits), 1e-9) and not saturated


def build(session: Session, principal: Principal, audit: Audit, page: int) -> dict[str, Any]:
    if CapacityAuditOptions.model_validate(audit.options).mode == "text":
        return {"mode": "text", "texts": service.text_results(session, audit, TEXTS_SHOWN)}
    series = capacity_series.series(session, audit)
    curves = [(s, plateau(s.points)) for s in series.memorized_vs_n]
    return {"mode": "uniform", "series": series, "curves": curves, "summary": audit.summary or {}}
