"""Service metadata: health, registered models, the property catalog."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel
from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import text

from app.deps import CurrentPrincipal, SessionDep, SettingsDep
from app.errors import ServiceUnavailable
from core.catalog import load_catalog

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
    """Liveness of the API, its database and (when configured) Redis. 503 when a dependency is down."""
    session.execute(text("SELECT 1"))
    if not settings.redis_url:
        return {"status": "ok", "database": "ok", "queue": "embedded"}
    try:
        Redis.from_url(settings.redis_url, socket_timeout=2).ping()
    except RedisError as exc:
        raise ServiceUnavailable("Redis is unreachable: check MEMAUDIT_REDIS_URL and the Redis server") from exc
    return {"status": "ok", "database": "ok", "queue": "redis"}


@router.get("/models", response_model=list[ModelRead])
def list_models(settings: SettingsDep, _: CurrentPrincipal) -> list[ModelRead]:
    """Registered models; any local path or cached hub id can also be used as `hf:<id-or-path>`."""
    return [ModelRead(name=n, backend=s.backend, description=s.description) for n, s in sorted(settings.models.items())]


@router.get("/properties", response_model=list[PropertyRead])
def list_properties(_: CurrentPrincipal) -> list[PropertyRead]:
    """The property catalog: what a subject audit can probe."""
    return [
        PropertyRead(
            pid=p.pid,
            label=p.label,
            description=p.description,
            datatype=p.datatype,
            value_type=p.value_type,
            templates=len(p.templates),
            pool_size=len(p.pool),
        )
        for p in load_catalog()
    ]
