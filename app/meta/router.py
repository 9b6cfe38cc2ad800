"""Service metadata: health, registered models, the property catalog."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import anyio
from fastapi import APIRouter
from pydantic import BaseModel
from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from app.audits.polling import MAX_STREAMS, open_streams
from app.db.engine import engine_for
from app.deps import CurrentPrincipal, SettingsDep
from app.errors import ServiceUnavailable
from app.reliability.admission import saturation
from app.settings import Settings
from core.catalog import load_catalog

router = APIRouter(tags=["meta"])
HEALTH_TIMEOUT_SECONDS = 2  # each dependency's check: a dependency slower than this counts as down
HEALTH_THREADS = 4
_health_limiter: anyio.CapacityLimiter | None = None


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


@lru_cache
def _health_engine(url: str) -> Engine:
    """A connection of its own for each check (no pool: a pool full of busy requests must not make the health
    check wait), failing after HEALTH_TIMEOUT_SECONDS; SQLite (embedded) uses the service's engine."""
    if url.startswith("sqlite"):
        return engine_for(url)
    timeout_ms = HEALTH_TIMEOUT_SECONDS * 1000
    args = {"connect_timeout": HEALTH_TIMEOUT_SECONDS, "options": f"-c statement_timeout={timeout_ms}"}
    return create_engine(url, poolclass=NullPool, connect_args=args, hide_parameters=True)


def _check(settings: Settings) -> dict[str, str]:
    try:
        with _health_engine(settings.database_url).connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:  # its message may hold connection details: not shown
        raise ServiceUnavailable(
            "the database is unreachable: check MEMAUDIT_DATABASE_URL and the database server", field="database"
        ) from exc
    if not settings.redis_url:
        return {"status": "ok", "database": "ok", "queue": "embedded"}
    try:
        redis = Redis.from_url(
            settings.redis_url, socket_timeout=HEALTH_TIMEOUT_SECONDS, socket_connect_timeout=HEALTH_TIMEOUT_SECONDS
        )
        with redis:
            redis.ping()
    except RedisError as exc:
        raise ServiceUnavailable(
            "Redis is unreachable: check MEMAUDIT_REDIS_URL and the Redis server", field="queue"
        ) from exc
    return {"status": "ok", "database": "ok", "queue": "redis"}


@router.get("/health")
async def health(settings: SettingsDep) -> dict[str, Any]:
    """Liveness of the API, its database and (when configured) Redis: 503 naming the dependency that is down.
    Answers while the API is busy: it waits for no admission slot, no pooled connection and no thread that other
    requests hold (threads of its own), and each check gives up after 2 s. `admission` says how busy the API is:
    its slots in use and the requests waiting for one (`saturated` when every slot is taken), and `streams` the
    event streams open (app/reliability/admission.py, app/audits/polling.py)."""
    global _health_limiter
    if _health_limiter is None:  # made in the server's event loop, on first use
        _health_limiter = anyio.CapacityLimiter(HEALTH_THREADS)
    answer: dict[str, Any] = await anyio.to_thread.run_sync(_check, settings, limiter=_health_limiter)
    slots = saturation()
    if slots is not None:
        answer["admission"] = slots
    answer["streams"] = {"open": open_streams(), "limit": MAX_STREAMS}
    return answer


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
