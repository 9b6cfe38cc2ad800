"""The dynamics audit's section of the dashboard page: the share of strings each measure flags per epoch, and
the loss trajectories of the first strings."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.models import Audit
from app.dynamics import service

STRINGS_SHOWN = 5


def build(session: Session, principal: Principal, audit: Audit, page: int) -> dict[str, Any]:
    _, link = service.dynamics_audit(session, principal, audit.id)
    return {"series": service.series(session, audit, link, None, STRINGS_SHOWN, None, None)}
