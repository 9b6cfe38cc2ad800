"""GET /rectification-set: the false values models assert about people (issue 42), for correcting pipelines."""

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

from app.auth.keys import Principal
from app.deps import require_roles
from app.forget_set.router import EXPORTERS
from app.policies import ForgetFilters
from app.rectification_set import service
from app.streaming import MEDIA_TYPES, download
from app.validation import IdFilter

router = APIRouter(tags=["rectification-set"])


@router.get("/rectification-set", response_class=StreamingResponse)
def export_rectification_set(
    principal: Annotated[Principal, Depends(require_roles(*EXPORTERS))],
    format: Annotated[Literal["jsonl", "csv"], Query(description="jsonl: one misattribution per line; csv")] = "jsonl",
    model: str | None = None,
    subject_id: IdFilter = None,
    audit_id: str | None = None,
    batch_id: Annotated[str | None, Query(description="the audits of one batch (POST /batches)")] = None,
    property: str | None = None,
    policy: Annotated[
        Literal[service.POLICIES],
        Query(
            description="pvalue: a fact whose misattribution p-value against the null of fictitious people is at most"
            " max_p; bh: Benjamini-Hochberg at false discovery rate q across this export"
        ),
    ] = "pvalue",
    max_p: Annotated[float, Query(gt=0.0, le=1.0, description="policy=pvalue: the p-value threshold")] = 0.01,
    q: Annotated[float, Query(gt=0.0, lt=1.0, description="policy=bh: the false discovery rate")] = 0.05,
    audits: Annotated[
        Literal["newest", "all"],
        Query(description="newest (default): the newest audit per subject, model and property; all: every audit's"),
    ] = "newest",
) -> StreamingResponse:
    """Export the facts for which a model prefers a specific false value beyond chance (GDPR Art. 16:
    rectification), streamed: subject, property, the asserted value, the true values, its p-value, the mode and the
    prompts that elicited it, the policy and the null that judged it, and provenance. `jsonl` ends with
    `{"_end": {"records": N}}` (and `pending`, `pending_by_status` when facts had no verdict yet); each full export
    is an entry of the evidence record (kind rectification_set_export), as the forget set's is."""
    filters = ForgetFilters(
        model, subject_id, audit_id, property, policy, None, None, max_p, q, batch_id, audits == "all"
    )
    return download(service.export(principal, filters, format), MEDIA_TYPES[format], f"rectification-set.{format}")
