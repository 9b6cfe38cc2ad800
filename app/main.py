"""The FastAPI application."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from app.audits.kinds import KINDS
from app.audits.router import router as audits_router
from app.capacity.router import router as capacity_router
from app.coverage.router import router as datasets_router
from app.dynamics.router import router as dynamics_router
from app.errors import DomainError
from app.forget_set.router import router as forget_set_router
from app.meta.router import router as meta_router
from app.nulls.router import router as nulls_router
from app.settings import get_settings
from app.subjects.router import router as subjects_router

log = logging.getLogger("memaudit.api")


def _field(loc: tuple) -> str:
    parts = [str(p) for p in (loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc)]
    if loc[:1] == ("body",) and len(parts) > 1 and parts[0] in KINDS:
        parts = parts[1:]  # the discriminator tag pydantic puts in the path of a union member, not a request field
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or "body"


async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    # Never echo the rejected input: it may be a name or a fact.
    details = [{"field": _field(tuple(e["loc"])), "message": e["msg"]} for e in exc.errors()]
    return JSONResponse(status_code=422, content={"detail": details})


async def domain_error(_: Request, exc: DomainError) -> JSONResponse:
    content = {"detail": [{"field": exc.field, "message": exc.message}] if exc.field else exc.message}
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
    return JSONResponse(status_code=exc.status_code, content=content, headers=headers)


@asynccontextmanager
async def lifespan(_: FastAPI):  # noqa: ANN201
    settings = get_settings()
    if not settings.redis_url:
        from app.embedded import resume_pending

        resume_pending()
    yield


def create_app() -> FastAPI:
    app = FastAPI(
        title="memaudit",
        version="0.1.0",
        summary="Audit language models for memorized personal data and datasets (GDPR Art. 17); export forget sets.",
        lifespan=lifespan,
    )
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(DomainError, domain_error)
    app.include_router(meta_router)
    app.include_router(audits_router)
    app.include_router(subjects_router)
    app.include_router(forget_set_router)
    app.include_router(datasets_router)
    app.include_router(capacity_router)
    app.include_router(dynamics_router)
    app.include_router(nulls_router)
    # Further feature routers are included here, one line each.
    return app


app = create_app()
