"""HTTP endpoints for datasets and coverage results: parse, call the service, map results."""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import APIRouter, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from starlette.datastructures import FormData, UploadFile

from app.coverage import repository, service
from app.coverage.formats import TARGETS, Target
from app.coverage.schemas import CoverageComparison, DatasetDeleted, DatasetPage, DatasetRead
from app.coverage.upload import read_form
from app.deps import CurrentPrincipal, SessionDep, SettingsDep, Submitter
from app.errors import InvalidInput
from app.streaming import MEDIA_TYPES, csv_lines, download, jsonl_lines
from app.validation import Page, PageSize

router = APIRouter(tags=["datasets"])

_FILE = {"type": "string", "format": "binary"}
UPLOAD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "\\S", "example": "movielens-sample"},
        **{t: {**_FILE, "description": f"the {t} file (.dat MovieLens '::', .csv or .tsv)"} for t in TARGETS},
        **{f"{t}_format": {"type": "string", "enum": ["movielens", "csv", "tsv"]} for t in TARGETS},
        "mapping": {
            "type": "string",
            "description": 'JSON: {"items": {"columns": [...], "roles": {"item_id": "..."}}, ...}; roles are '
            "item_id, user_id, timestamp; the id column comes first",
        },
    },
}


def _sources(form: FormData) -> tuple[str, list[service.SourceFile]]:
    unknown = set(form.keys()) - {"name", "mapping", *TARGETS, *(f"{t}_format" for t in TARGETS)}
    if unknown:
        fields = ", ".join(["name", "mapping", *TARGETS, *(f"{t}_format" for t in TARGETS)])
        raise InvalidInput("form", f"unknown form field(s): the form takes {fields}")
    try:
        mappings = json.loads(str(form.get("mapping") or "{}"))
    except json.JSONDecodeError:
        raise InvalidInput("mapping", "mapping must be a JSON object keyed by items, users, interactions") from None
    if not isinstance(mappings, dict) or set(mappings) - set(TARGETS):
        raise InvalidInput("mapping", "mapping must be a JSON object keyed by items, users, interactions")
    sources = []
    for target in TARGETS:
        upload = form.get(target)
        if upload is None:
            if target in mappings:
                raise InvalidInput("mapping", f"a mapping is given for {target} but no {target} file")
            continue
        if not isinstance(upload, UploadFile):
            raise InvalidInput(target, f"{target} must be a file part")
        fmt = form.get(f"{target}_format")
        sources.append(
            service.SourceFile(
                target,
                upload.filename or "",
                upload.file,
                upload.size or 0,
                str(fmt) if fmt else None,
                mappings.get(target),
            )
        )
    return str(form.get("name") or ""), sources


@router.post(
    "/datasets",
    status_code=status.HTTP_201_CREATED,
    response_model=DatasetRead,
    openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": UPLOAD_SCHEMA}}}},
)
async def upload_dataset(
    request: Request, session: SessionDep, settings: SettingsDep, principal: Submitter
) -> DatasetRead:
    """Upload a dataset's files (multipart). Streamed to temporary files under the size limit, then parsed
    line by line; malformed lines are skipped and listed with their line numbers in the answer."""
    form = await read_form(request, settings.max_dataset_upload_bytes)
    try:
        name, sources = _sources(form)
        dataset = await run_in_threadpool(service.ingest, session, settings, principal, name, sources)
        return await run_in_threadpool(service.read, session, dataset)
    finally:
        await form.close()


@router.get("/datasets", response_model=DatasetPage)
def list_datasets(
    session: SessionDep,
    principal: CurrentPrincipal,
    page: Page = 1,
    page_size: PageSize = 50,
) -> DatasetPage:
    rows, total = repository.page(session, principal, page=page, page_size=page_size)
    files = repository.files_of(session, [d.id for d in rows])
    items = [service.to_read(d, files[d.id]) for d in rows]
    return DatasetPage(items=items, page=page, page_size=page_size, total=total)


@router.get("/datasets/{dataset_id}", response_model=DatasetRead)
def get_dataset(dataset_id: str, session: SessionDep, principal: CurrentPrincipal) -> DatasetRead:
    return service.read(session, service.get_dataset(session, principal, dataset_id))


@router.delete("/datasets/{dataset_id}", response_model=DatasetDeleted)
def delete_dataset(dataset_id: str, session: SessionDep, principal: Submitter) -> DatasetDeleted:
    """Delete a dataset, its records and the coverage outcomes quoting them (audit summaries remain)."""
    return DatasetDeleted(id=dataset_id, records_deleted=service.delete(session, principal, dataset_id))


@router.get("/datasets/{dataset_id}/coverage", response_model=CoverageComparison)
def compare_models(
    dataset_id: str, session: SessionDep, principal: CurrentPrincipal, target: Target | None = None
) -> CoverageComparison:
    """Coverage of this dataset across models: one row per coverage audit, with coverage per bucket."""
    return service.compare(session, principal, dataset_id, target)


@router.get("/audits/{audit_id}/records", response_class=StreamingResponse)
def coverage_records(
    audit_id: str,
    session: SessionDep,
    principal: CurrentPrincipal,
    matched: bool | None = None,
    format: Literal["jsonl", "csv"] = "jsonl",
) -> StreamingResponse:
    """Per-record outcomes of a coverage audit (streamed): expected and generated line, exact match,
    fuzzy character ratio, popularity and bucket. `matched=true` lists the records that leak."""
    service.coverage_audit(session, principal, audit_id)
    rows = service.result_rows(audit_id, matched)
    body = jsonl_lines(rows) if format == "jsonl" else csv_lines(rows, service.RECORD_FIELDS)
    return download(body, MEDIA_TYPES[format], f"coverage-{audit_id}.{format}")
