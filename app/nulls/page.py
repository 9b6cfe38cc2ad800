"""The null audit's section of the dashboard page: what a null is, in two sentences, and where its numbers are."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.models import Audit

ABOUT = (
    "A null audits fictitious people — names and facts no model can have seen — exactly as a subject audit is run,"
    " on the same model and settings, so it shows how often chance and inference alone make a fact look memorized."
    " Every verdict on a real person is a p-value against it: the share of these fictitious facts that look at least"
    " as memorized, so verdicts wait for the null to finish."
)


def build(session: Session, principal: Principal, audit: Audit, page: int) -> dict[str, Any]:
    return {"summary": audit.summary or {}}
