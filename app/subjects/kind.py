"""The subject audit kind (WikiMem): which facts about one person a model has memorized."""

from __future__ import annotations

from app.audits.kinds import AuditKind, KindPage
from app.db.models import Audit
from app.subjects import page
from app.subjects.router import cohort_router, router
from app.subjects.schemas import SubjectAuditCreate, SubjectAuditOptions
from app.subjects.service import prefetch_subject, prepare_subject_audit


def links(_: Audit) -> dict[str, str]:
    return {"facts": "facts"}


KIND = AuditKind(
    name="subject",
    create=SubjectAuditCreate,
    options=SubjectAuditOptions,
    prepare=prepare_subject_audit,
    job="workers.jobs.subject.run",
    routers=(router, cohort_router),
    links=links,
    subject_token=True,
    prefetch=prefetch_subject,
    max_body_bytes=256 * 1024,  # 50 facts of 300 characters, escaped: well under 100 KB
    page=KindPage(page.build, "kinds/subject.html"),
)
