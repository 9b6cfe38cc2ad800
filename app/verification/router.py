"""HTTP endpoint of verification results: per fact, before and after, the paired test, the status and the probes."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import CurrentPrincipal, SessionDep
from app.validation import Page, PageSize
from app.verification import service
from app.verification.schemas import VerificationPage

router = APIRouter(tags=["verification"])


@router.get("/audits/{audit_id}/verification", response_model=VerificationPage, tags=["audits"])
def get_verification(
    audit_id: str, session: SessionDep, principal: CurrentPrincipal, page: Page = 1, page_size: PageSize = 100
) -> VerificationPage:
    """Per fact of each person (by subject id and property; no names or values): before and after p-value and
    verdict against each model's own null, the paired test (exact McNemar over the templates' rank-1 outcomes),
    the status (removed | still retrievable | inconclusive, with the reason), the held-out-template and relearning
    probes; `summary` (once the audit has succeeded) has the rates, over-forgetting and the probes' totals."""
    return service.read_page(session, principal, audit_id, page, page_size)
