"""The null audit kind: the null distribution of a subject-audit configuration on fictitious people (calibration
of every subject verdict: p-values and each policy's false-positive rate). Its router also serves the cohort
statistics, which put a cohort's WikiMem rates beside the null's."""

from __future__ import annotations

from app.audits.kinds import AuditKind, KindPage
from app.db.models import Audit
from app.nulls import page
from app.nulls.prepare import prepare_null_audit
from app.nulls.request import NullAuditCreate
from app.nulls.router import router
from app.nulls.schemas import SubjectAuditOptions


def links(_: Audit) -> dict[str, str]:
    return {"null": "null"}


KIND = AuditKind(
    name="null",
    create=NullAuditCreate,
    options=SubjectAuditOptions,  # the subject-audit configuration the null calibrates
    prepare=prepare_null_audit,
    job="workers.jobs.null.run",
    max_body_bytes=64 * 1024,  # 64 property ids and the options
    routers=(router,),
    links=links,
    background=True,  # created by submissions that need it: on a batch lane, never ahead of a single audit
    page=KindPage(page.build, "kinds/null.html", about=page.ABOUT),
)
