"""The verification audit's section of the dashboard page: the verdict in numbers (removed, still retrievable,
inconclusive; over-forgetting; the probes), then per person and fact before and after, with the person's name
(the read is recorded in the access log)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.models import Audit
from app.privacy import access_log
from app.verification import service

FACTS_PER_PAGE = 50
ABOUT = (
    "A verification checks an unlearned (after) model against the before model: each person's audit is redone on"
    " the after model with the same configuration, and each fact is judged against each model's own null."
)


def build(session: Session, principal: Principal, audit: Audit, page: int) -> dict[str, Any]:
    found = service.read_page(session, principal, audit.id, page, FACTS_PER_PAGE)
    ids = [f.subject_id for f in found.facts]
    names = service.subject_names(session, ids)
    for sid in dict.fromkeys(ids):
        access_log.record(session, principal, "read_verification", subject_id=sid, audit_id=audit.id)
    return {
        "page": found,
        "names": names,
        "pages": max(1, -(-found.total // FACTS_PER_PAGE)),
        "summary": found.summary or {},
    }
