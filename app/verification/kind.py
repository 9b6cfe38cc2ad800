"""The verification audit kind (issue 26): did the forgetting work? An after (unlearned) model checked against a
before model's audits, per person and per fact, with a paired test and robustness probes."""

from __future__ import annotations

from app.audits.kinds import AuditKind, KindPage
from app.db.models import Audit
from app.verification import page
from app.verification.router import router
from app.verification.schemas import VerificationAuditCreate, VerificationStored
from app.verification.service import prepare_verification, stored_options


def links(_: Audit) -> dict[str, str]:
    return {"verification": "verification"}


KIND = AuditKind(
    name="verification",
    create=VerificationAuditCreate,
    options=VerificationStored,
    prepare=prepare_verification,
    job="workers.jobs.verification.run",
    routers=(router,),
    links=links,
    stored_options=stored_options,
    # on a batch lane, as the nulls it waits for: its steps take turns with their chunks (a verification on the
    # interactive lane would be served before them by the embedded runner, again and again)
    background=True,
    max_body_bytes=1024 * 1024,  # 1,500 forget-set records of their four fields take ~150 KB
    page=KindPage(page.build, "kinds/verification.html", about=page.ABOUT),
)
