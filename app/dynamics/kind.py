"""The dynamics audit kind (Ghosh et al. 2025): recollection, counterfactual and contextual memorization of
strings, from train and held-out loss trajectories of K training runs (or trajectories you bring)."""

from __future__ import annotations

from app.audits.kinds import AuditKind, KindPage
from app.db.models import Audit
from app.dynamics import page
from app.dynamics.router import router
from app.dynamics.schemas import DynamicsAuditCreate, DynamicsOptions
from app.dynamics.service import prepare_dynamics_audit


def links(_: Audit) -> dict[str, str]:
    return {"strings": "strings", "series": "series"}


KIND = AuditKind(
    name="dynamics",
    create=DynamicsAuditCreate,
    options=DynamicsOptions,
    prepare=prepare_dynamics_audit,
    job="workers.jobs.dynamics.run",
    routers=(router,),
    links=links,
    page=KindPage(page.build, "kinds/dynamics.html"),
)
