"""The capacity audit kind (Morris et al. 2025): bits memorized by models trained from scratch on uniform data
(uniform mode), or by a given model on given texts against a reference (text mode)."""

from __future__ import annotations

from app.audits.kinds import AuditKind, KindPage
from app.capacity import page
from app.capacity.router import router
from app.capacity.schemas import SCRATCH, CapacityAuditCreate, CapacityAuditOptions
from app.capacity.service import prepare_capacity_audit
from app.db.models import Audit


def links(audit: Audit) -> dict[str, str]:
    """Each mode's own result pages (the other mode's answer 404)."""
    if CapacityAuditOptions.model_validate(audit.options).mode == "text":
        return {"texts": "capacity/texts"}
    return {"grid": "capacity", "series": "capacity/series"}


KIND = AuditKind(
    name="capacity",
    create=CapacityAuditCreate,
    options=CapacityAuditOptions,
    prepare=prepare_capacity_audit,
    job="workers.jobs.capacity.run",
    routers=(router,),
    links=links,
    stored_options=CapacityAuditCreate.stored_options,
    own_models=(SCRATCH,),
    max_body_bytes=8 * 1024 * 1024,  # a grid is a few KB; text mode carries the samples (5,000 at most)
    page=KindPage(page.build, "kinds/capacity.html"),
)
