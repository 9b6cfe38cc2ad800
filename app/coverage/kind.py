"""The coverage audit kind (Di Palma et al. 2025): how much of an uploaded dataset a model reproduces."""

from __future__ import annotations

from app.audits.kinds import AuditKind, KindPage
from app.coverage import page
from app.coverage.router import router
from app.coverage.schemas import CoverageAuditCreate, CoverageOptions
from app.coverage.service import prepare_coverage_audit
from app.db.models import Audit


def links(_: Audit) -> dict[str, str]:
    return {"records": "records"}


KIND = AuditKind(
    name="coverage",
    create=CoverageAuditCreate,
    options=CoverageOptions,
    prepare=prepare_coverage_audit,
    job="workers.jobs.coverage.run",
    max_body_bytes=64 * 1024,  # a dataset id and options: the records are uploaded to POST /datasets
    routers=(router,),
    links=links,
    page=KindPage(page.build, "kinds/coverage.html"),
)
