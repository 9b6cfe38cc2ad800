"""The coverage audit's section of the dashboard page: coverage per popularity bucket and the reproduced records,
each with the prompt it was probed with."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.coverage import service
from app.db.models import Audit

RECORDS_SHOWN = 20


def build(session: Session, principal: Principal, audit: Audit, page: int) -> dict[str, Any]:
    summary = audit.summary or {}
    records = service.records_with_prompts(session, audit, RECORDS_SHOWN)  # the reproduced, with their prompts
    return {
        "summary": summary,
        "buckets": summary.get("buckets", []),
        "records": records,
        "records_shown": RECORDS_SHOWN,
        "dataset_id": summary.get("dataset_id"),
    }
