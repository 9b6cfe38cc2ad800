"""HTTP endpoints of null calibration: a null audit's distributions, its artifact's export and import (the cohort
statistics, which read subject audits, are app/subjects/router.py's)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response, status

from app.audits.service import visible_audit_of_kind
from app.db.models import Audit
from app.db.vocabulary import Role
from app.deps import CurrentPrincipal, SessionDep, SettingsDep, require_roles
from app.nulls import artifact, intake, repository
from app.nulls.schemas import NullImported
from app.nulls.shipped import weights

router = APIRouter(tags=["null calibration"])
MAX_FACTS_SHOWN = 5000
Admin = Annotated[object, Depends(require_roles(Role.ADMIN))]


@router.get("/audits/{audit_id}/null")
def get_null(
    audit_id: str,
    session: SessionDep,
    principal: CurrentPrincipal,
    detail: Literal["summary", "facts"] = "summary",
    limit: Annotated[int, Query(ge=1, le=MAX_FACTS_SHOWN)] = 1000,
) -> dict[str, Any]:
    """A null audit's distributions per property: its configuration, the model fingerprint it ran on, K people,
    the false-positive rate of each policy; with `detail=facts`, the null facts themselves (fictitious people)."""
    audit = visible_audit_of_kind(session, principal, audit_id, "null")
    out = []
    for row in repository.of_audit(session, audit_id):
        item: dict[str, Any] = {
            "property": row.property_id,
            "key": row.key,
            "method": row.method,
            "people": row.people,
            "null_facts": row.n_facts,
            "fingerprint": row.fingerprint,
            "config": row.config,
            "summary": row.summary,
        }
        if detail == "facts":
            item["facts"] = [
                {
                    "person": f.person,
                    "name": f.name,
                    "value": f.value,
                    "assigned": f.assigned,
                    "share": f.share,
                    "strict": f.strict,
                    "lenient": f.lenient,
                    "z_star": f.z_star,
                    "n_templates": f.n_templates,
                    "statistic": f.statistic,
                    "n_values": f.n_values,
                    "in_pool": f.in_pool,
                }
                for f in repository.facts(session, row.id, limit)
            ]
        out.append(item)
    return {"audit_id": audit_id, "status": audit.status, "distributions": out}


@router.get(
    "/nulls/{audit_id}/artifact",
    response_class=Response,
    responses={200: {"content": {artifact.MEDIA_TYPE: {}}, "description": "the null artifact (memaudit.null/1)"}},
)
def export_null(audit_id: str, session: SessionDep, settings: SettingsDep, _: Admin) -> Response:
    """A succeeded null audit as a file (`memaudit.null/1`, gzip JSON): its key (model fingerprint, each property's
    configuration and key, verdict statistic, name generator, seed) and every stored null fact (fictitious people
    only). Admins only; 409 while the null has not succeeded."""
    row = session.get(Audit, audit_id)
    document = artifact.build(session, audit_id, weights(row.model, settings) if row is not None else None)
    name = f"null-{audit_id}{artifact.SUFFIX}"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return Response(artifact.dumps(document), media_type=artifact.MEDIA_TYPE, headers=headers)


@router.post(
    "/nulls/import",
    response_model=NullImported,
    responses={200: {"description": "the file was imported before: its null audit"}},
    status_code=status.HTTP_201_CREATED,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {artifact.MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def import_null(
    request: Request,
    response: Response,
    settings: SettingsDep,
    _: Admin,
    model: Annotated[
        str | None, Query(max_length=300, description="import under this model (default: the file's)")
    ] = None,
) -> NullImported:
    """Import a null artifact (what GET /nulls/{id}/artifact or `memaudit nulls export` wrote): a succeeded null
    audit the calibration uses like one computed here. Idempotent (the same file again: 200 and its null audit).
    The file's start is checked first and its inflated size counted (at most 16 x max_null_artifact_bytes and 32
    MiB: a real null is 3-4 MB); it is then parsed, validated and stored by a process of its own (app/nulls/intake.py),
    so the API keeps answering. The whole file is checked before anything is written (422 naming the field: format,
    statistic, generator, model.fingerprint, a distribution's key, columns or rows); admins only; at most
    max_null_artifact_bytes."""
    data = await request.body()
    audit_id, created = await intake.import_file(data, model, settings)
    if not created:
        response.status_code = status.HTTP_200_OK
    return NullImported(null_audit_id=audit_id, created=created)
