"""Service metadata: health, registered models, the property catalog."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy import text

from app.catalog import load_catalog
from app.deps import CurrentPrincipal, SessionDep, SettingsDep

router = APIRouter(tags=["meta"])


class ModelRead(BaseModel):
    name: str
    backend: str
    description: str


class PropertyRead(BaseModel):
    pid: str
    label: str
    description: str
    datatype: str
    value_type: str
    templates: int
    pool_size: int


@router.get("/health")
def health(session: SessionDep, settings: SettingsDep) -> dict[str, str]:
    session.execute(text("SELECT 1"))
    return {"status": "ok", "database": "ok", "queue": "redis" if settings.redis_url else "embedded"}


@router.get("/models", response_model=list[ModelRead])
def list_models(settings: SettingsDep, _: CurrentPrincipal) -> list[ModelRead]:
    """Registered models; any local path or cached hub id can also be used as `hf:<id-or-path>`."""
    return [ModelRead(name=n, backend=s.backend, description=s.description) for n, s in sorted(settings.models.items())]


@router.get("/properties", response_model=list[PropertyRead])
def list_properties(_: CurrentPrincipal) -> list[PropertyRead]:
    """The property catalog: what a subject audit can probe."""
    return [
        PropertyRead(pid=p.pid, label=p.label, description=p.description, datatype=p.datatype,
                     value_type=p.value_type, templates=len(p.templates), pool_size=len(p.pool))
        for p in load_catalog()
    ]
