"""The FastAPI application."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.audits.kinds import KINDS
from app.audits.router import router as audits_router
from app.capacity.router import router as capacity_router
from app.coverage.router import router as datasets_router
from app.dynamics.router import router as dynamics_router
from app.errors import DomainError, TooManyRequests, error_body
from app.forget_set.router import router as forget_set_router
from app.http_errors import http_error
from app.meta.router import router as meta_router
from app.middleware import ErrorScrubber, RequestGuard
from app.openapi import ERROR_RESPONSES
from app.openapi import install as install_openapi
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
    details = [_detail(e) for e in exc.errors()]
    return JSONResponse(status_code=422, content={"detail": details})


def _detail(error: dict) -> dict[str, str]:
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":  # the unknown field's name is the client's input: name its parent
        parent = loc[:-1]
        if len(parent) == 2 and parent[0] == "body" and parent[1] in KINDS:
            parent = ("body",)  # the union member's tag, not a field
        return {"field": _field(parent), "message": "unknown field: send only the fields the schema lists"}
    if error["type"] == "union_tag_invalid":
        return {"field": "kind", "message": f"kind must be one of {error['ctx']['expected_tags']}"}
    value, message = error.get("input"), error["msg"]
    if isinstance(value, str) and len(value) >= 3 and value in message:  # a message quoting the input: say less
        message = f"invalid value ({error['type']})"
    return {"field": _field(loc), "message": message}


async def domain_error(_: Request, exc: DomainError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else {}
    if isinstance(exc, TooManyRequests):
        headers["Retry-After"] = str(exc.retry_after)
    return JSONResponse(status_code=exc.status_code, content=error_body(exc.message, exc.field), headers=headers)


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
        responses=ERROR_RESPONSES,  # every route may answer these, all in the one error shape
    )
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(DomainError, domain_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_middleware(RequestGuard)  # limits, authentication and rate limits before the body is read
    app.add_middleware(ErrorScrubber)  # outermost: no exception message (maybe personal data) reaches the log
    app.include_router(meta_router)
    app.include_router(audits_router)
    app.include_router(subjects_router)
    app.include_router(forget_set_router)
    app.include_router(datasets_router)
    app.include_router(capacity_router)
    app.include_router(dynamics_router)
    # Further feature routers are included here, one line each.
    install_openapi(app, {kind.schema.__name__: kind.own_models for kind in KINDS.values()})
    return app


app = create_app()
