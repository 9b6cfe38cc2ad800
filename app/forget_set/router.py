"""GET /forget-set. No postponed annotations here: the ``policy`` parameter's type is built from the registered
policies when the app is created, and FastAPI reads it from the signature as it is."""

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

from app.auth.keys import Principal
from app.deps import require_roles
from app.forget_set import service
from app.policies import DEFAULT, POLICIES, ForgetFilters
from app.streaming import MEDIA_TYPES, download
from app.validation import IdFilter
from core import defaults

MEDIA = {**MEDIA_TYPES, "tofu": MEDIA_TYPES["jsonl"]}
SUFFIX = {"jsonl": "jsonl", "csv": "csv", "tofu": "tofu.jsonl"}
EXPORTERS = ("admin", "auditor", "pipeline")  # who may export a forget set (a regulator reads, exports nothing)


def make_router() -> APIRouter:
    """GET /forget-set over the policies registered now (app.policies.POLICIES): its ``policy`` parameter
    is their enum, described by them (create_app builds it, so a policy registered before is in the API)."""
    router = APIRouter(tags=["forget-set"])
    names = tuple(POLICIES)
    router.get("/forget-set", response_class=StreamingResponse)(_export_route(Literal[names], POLICIES.described()))
    return router


def _export_route(policy_names: Any, described: str) -> Callable[..., StreamingResponse]:
    def export_forget_set(
        principal: Annotated[Principal, Depends(require_roles(*EXPORTERS))],
        format: Annotated[
            Literal["jsonl", "csv", "tofu"],
            Query(
                description="jsonl: one memorized fact per line; csv; tofu: question / answer / "
                "paraphrased_answer / perturbed_answer lines for TOFU-style unlearning (open-unlearning)"
            ),
        ] = "jsonl",
        model: str | None = None,
        subject_id: IdFilter = None,
        audit_id: str | None = None,
        batch_id: Annotated[str | None, Query(description="the audits of one batch (POST /batches)")] = None,
        property: str | None = None,
        policy: Annotated[
            policy_names,
            Query(
                description=f"{described}. Every record says its policy, p-value, the policy's false-positive rate"
                " and which null produced it"
            ),
        ] = DEFAULT,
        min_share: Annotated[float | None, Query(ge=0.0, le=1.0)] = None,
        min_z: Annotated[
            float | None,
            Query(
                allow_inf_nan=False,
                description="keep facts whose z̄* (mean z* over the templates that rank a true value first) is at "
                f"least min_z; {defaults.CHANCE_Z_PHRASE} (docs/measures.md)",
            ),
        ] = None,
        max_p: Annotated[float, Query(gt=0.0, le=1.0, description="policy=pvalue: the p-value threshold")] = 0.01,
        q: Annotated[float, Query(gt=0.0, lt=1.0, description="policy=bh: the false discovery rate")] = 0.05,
        audits: Annotated[
            Literal["newest", "all"],
            Query(
                description="newest (default): the facts of the newest audit per subject, model and property (a subject"
                " audited again is exported once); all: every audit's"
            ),
        ] = "newest",
        end_only: Annotated[
            bool,
            Query(
                description="answer only the jsonl end marker (records, pending): no record is sent, so nothing is"
                " recorded as exported (what `memaudit export --format csv|tofu` asks for its summary)"
            ),
        ] = False,
    ) -> StreamingResponse:
        """Export memorized facts as a forget set for an unlearning pipeline (streamed). Every filter is checked before
        the first byte. `jsonl` ends with the line `{"_end": {"records": N}}`: without it the stream was cut; when the
        p-value policies left facts out for want of a null, it also says `pending` (how many), `pending_by_status`,
        `pending_eta_seconds` and `pending_nulls` (each with its progress). An error mid-stream aborts the response (no
        final chunk), which every HTTP client reports."""
        POLICIES.named(policy).check({"min_share": min_share, "min_z": min_z, "max_p": max_p, "q": q})
        filters = ForgetFilters(
            model, subject_id, audit_id, property, policy, min_share, min_z, max_p, q, batch_id, audits == "all"
        )
        if end_only:
            return download(service.end_marker_only(principal, filters), MEDIA["jsonl"], "forget-set-end.jsonl")
        return download(service.export(principal, filters, format), MEDIA[format], f"forget-set.{SUFFIX[format]}")

    return export_forget_set
