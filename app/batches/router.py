"""HTTP endpoints of batches: parse (JSON or an uploaded roster file), call the service, map results."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import MultiPartException

from app.audits.kinds import KindsDep
from app.batches import service
from app.batches.report import read_report
from app.batches.roster import rows_from_json
from app.batches.schemas import BatchAuditsPage, BatchCreate, BatchCreated, BatchRead, BatchReport
from app.db.models.audit import AuditStatus
from app.deps import CurrentPrincipal, SessionDep, SettingsDep, Submitter
from app.errors import InvalidInput
from app.subjects.schemas import SubjectAuditOptions
from app.validation import Page, PageSize

router = APIRouter(prefix="/batches", tags=["batches"])
UPLOAD_FIELDS = ("roster", "model", "options")

_UPLOAD_SCHEMA = {
    "type": "object",
    "required": ["roster", "model"],
    "additionalProperties": False,
    "properties": {
        "roster": {"type": "string", "format": "binary", "description": "CSV (.csv) or JSON lines (.jsonl)"},
        "model": {"type": "array", "items": {"type": "string"}, "description": "repeat to compare models"},
        "options": {"type": "string", "description": "subject audit options as a JSON object"},
    },
}
# The JSON body's schema inline; its nested models (SubjectAuditOptions) are components already (POST /audits).
_JSON_SCHEMA = {
    k: v for k, v in BatchCreate.model_json_schema(ref_template="#/components/schemas/{model}").items() if k != "$defs"
}
_OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": _JSON_SCHEMA},
            "multipart/form-data": {"schema": _UPLOAD_SCHEMA},
        },
    }
}


async def _upload_spec(request: Request, partial: bool) -> service.BatchSpec:
    try:  # the body's size is bounded by app.middleware.RequestGuard (413), counted as it streams in
        form = await request.form(max_files=1, max_fields=len(UPLOAD_FIELDS) + 4)
    except MultiPartException as exc:
        raise InvalidInput("body", f"not a valid multipart upload: {exc.message}") from None
    except StarletteHTTPException as exc:  # Starlette reports a form over its limits as a 400 with this message
        raise InvalidInput(
            "body", f"not a valid multipart upload: {exc.detail}; send only the fields {', '.join(UPLOAD_FIELDS)}"
        ) from None
    roster, models, raw_options = form.get("roster"), form.getlist("model"), form.get("options")
    if not isinstance(roster, UploadFile):
        raise InvalidInput("roster", "upload the roster file in the form field `roster`")
    if not models or not all(isinstance(m, str) and m for m in models):
        raise InvalidInput("model", "give the model in the form field `model` (repeat it to compare models)")
    try:
        options = SubjectAuditOptions.model_validate_json(raw_options) if isinstance(raw_options, str) else None
    except ValidationError:
        raise InvalidInput("options", "options must be a JSON object of subject audit options") from None
    data = await roster.read()
    spec = (data, roster.filename, list(models), options or SubjectAuditOptions(), partial)
    return await run_in_threadpool(service.file_spec, *spec)  # a large roster is parsed off the event loop


async def _json_spec(request: Request, partial: bool) -> service.BatchSpec:
    return await run_in_threadpool(_json_spec_of, await request.body(), partial)  # off the event loop


def _json_spec_of(data: bytes, partial: bool) -> service.BatchSpec:
    try:
        body = BatchCreate.model_validate_json(data)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None
    digest = hashlib.sha256(data).hexdigest()
    return service.BatchSpec(body.model_list(), body.options, rows_from_json(body.people), digest, partial)


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=BatchCreated, openapi_extra=_OPENAPI)
async def create_batch(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: Submitter,
    response: Response,
    partial: Annotated[bool, Query(description="create the valid rows and report the others")] = False,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", min_length=1, max_length=200)] = None,
) -> Any:
    """Submit a roster (JSON, or a CSV / JSON-lines file as multipart `roster`): every row is validated first; bad
    rows → 422 listing each row and field (nothing created), or with `partial=true` only the valid rows are
    created. One subject audit per person and model, queued behind single audits (fair scheduling).

    A rejected roster's 422 is the one error shape with more: `detail[0]` sums up (`field` null), then one item per
    bad row (at most 1,000) with its `row` (1-based) beside `field` and `message`; `rows` and `rejected` count
    them. Messages never repeat a value."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        spec = await _upload_spec(request, partial)
    elif content_type.startswith("application/json"):
        spec = await _json_spec(request, partial)
    else:
        raise InvalidInput("body", "send the roster as application/json or as a multipart/form-data upload")

    def create() -> Any:
        try:
            batch, roster = service.create_batch(session, settings, principal, spec, idempotency_key)
        except service.RosterRejected as exc:
            errors = service.errors_read(exc.roster.errors)
            detail = [{"field": None, "message": exc.message, "row": None}, *errors]
            return JSONResponse(
                status_code=422,
                content={"detail": detail, "rows": exc.roster.rows, "rejected": exc.roster.rejected_rows},
            )
        session.commit()  # the 202 acknowledges only what is durable: committed, and enqueued by the commit's hook
        response.headers["Location"] = f"/batches/{batch.id}"
        if roster is None:
            response.headers["Idempotent-Replayed"] = "true"
        out = service.batch_read(session, batch).model_dump()
        errors = service.errors_read(roster.errors) if roster is not None else []
        return jsonable_encoder(BatchCreated(**out, errors=errors))

    return await run_in_threadpool(create)


@router.get("/{batch_id}", response_model=BatchRead)
def get_batch(batch_id: str, session: SessionDep, principal: CurrentPrincipal) -> BatchRead:
    """Progress: audits queued / running / succeeded / failed / cancelled, overall and per model, and an ETA."""
    return service.batch_read(session, service.get_batch(session, principal, batch_id))


@router.get("/{batch_id}/report", response_model=BatchReport)
def get_report(batch_id: str, session: SessionDep, principal: CurrentPrincipal) -> BatchReport:
    """Cohort statistics per model (M̄ strict / lenient, z̄* over rank-1 templates, H_{M=0}, per property, and the
    matching null's rates beside them) over the batch's succeeded audits; with several models, what one memorized
    and another did not."""
    return read_report(session, service.get_batch(session, principal, batch_id))


@router.get("/{batch_id}/audits", response_model=BatchAuditsPage)
def list_batch_audits(
    batch_id: str,
    session: SessionDep,
    principal: CurrentPrincipal,
    kinds: KindsDep,
    status_: Annotated[AuditStatus | None, Query(alias="status")] = None,
    page: Page = 1,
    page_size: PageSize = 50,
) -> BatchAuditsPage:
    batch = service.get_batch(session, principal, batch_id)
    return service.page_audits(session, principal, batch, status_, page, page_size, kinds)


@router.delete("/{batch_id}", response_model=BatchRead)
def cancel_batch(batch_id: str, session: SessionDep, principal: Submitter) -> BatchRead:
    """Cancel the batch's audits that have not started (running ones finish)."""
    batch = service.cancel_batch(session, principal, batch_id)
    session.commit()
    return service.batch_read(session, batch)
