"""The FastAPI application."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.audits.kinds import KindRegistry
from app.audits.router import router as audits_router
from app.audits.router import submit_router
from app.batches.router import router as batches_router
from app.embedded import resume_pending
from app.errors import DomainError, TooManyRequests, error_body
from app.evidence.router import router as evidence_router
from app.forget_set.router import make_router as forget_set_router
from app.http_errors import http_error
from app.kinds import KINDS
from app.meta.docs import mount_docs
from app.meta.router import router as meta_router
from app.middleware import ErrorScrubber, RequestGuard
from app.openapi import ERROR_RESPONSES
from app.openapi import install as install_openapi
from app.privacy.router import router as privacy_router
from app.rectification_set.router import router as rectification_set_router
from app.reliability.admission import Admission
from app.requests.router import router as requests_router
from app.settings import get_settings
from app.ui.router import mount as mount_dashboard
from app.validation import error_message

log = logging.getLogger("memaudit.api")


def _field(loc: tuple, kinds: KindRegistry) -> str:
    parts = [str(p) for p in (loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc)]
    if loc[:1] == ("body",) and len(parts) > 1 and parts[0] in kinds:
        parts = parts[1:]  # the discriminator tag pydantic puts in the path of a union member, not a request field
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or "body"


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    # Never echo the rejected input: it may be a name or a fact.
    kinds = request.app.state.kinds
    details = [_detail(e, kinds) for e in exc.errors()]
    return JSONResponse(status_code=422, content={"detail": details})


def _detail(error: dict, kinds: KindRegistry) -> dict[str, str]:
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":  # the unknown field's name is the client's input: name its parent
        parent = loc[:-1]
        if len(parent) == 2 and parent[0] == "body" and parent[1] in kinds:
            parent = ("body",)  # the union member's tag, not a field
        return {"field": _field(parent, kinds), "message": "unknown field: send only the fields the schema lists"}
    if error["type"] == "union_tag_invalid":
        return {"field": "kind", "message": f"kind must be one of {error['ctx']['expected_tags']}"}
    if error["type"] == "json_invalid":  # loc is ("body", character offset): not a field
        reason = (error.get("ctx") or {}).get("error", "invalid JSON")
        return {
            "field": "body",
            "message": f"the body is not valid JSON ({reason}, at character {loc[-1]}): "
            "send one JSON object as the schema describes",
        }
    value, message = error.get("input"), error_message(error)
    if isinstance(value, str) and len(value) >= 3 and value in message:  # a message quoting the input: say less
        message = f"invalid value ({error['type']})"
    return {"field": _field(loc, kinds), "message": message}


async def domain_error(_: Request, exc: DomainError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else {}
    if isinstance(exc, TooManyRequests):
        headers["Retry-After"] = str(exc.retry_after)
    return JSONResponse(status_code=exc.status_code, content=error_body(exc.message, exc.field), headers=headers)


@asynccontextmanager
async def lifespan(app: FastAPI):
    settings = get_settings()
    if not settings.redis_url:
        resume_pending(app.state.kinds)
    yield


def create_app(kinds: KindRegistry = KINDS) -> FastAPI:
    """The API over ``kinds`` (app/kinds.py lists the service's own; a test may add a kind)."""
    app = FastAPI(
        title="memaudit",
        version="0.1.0",
        summary="Audit language models for memorized personal data and datasets (GDPR Art. 17); export forget sets.",
        lifespan=lifespan,
        docs_url=None,  # /docs from the vendored Swagger UI (app/meta/docs.py); no ReDoc (a CDN's)
        redoc_url=None,
        responses=ERROR_RESPONSES,  # every route may answer these, all in the one error shape
    )
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(DomainError, domain_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.state.kinds = kinds
    # Innermost of the three: bounds whatever holds threads and database connections (app/reliability/admission),
    # and is entered only once RequestGuard has authenticated the request and read its whole body (in time).
    settings = get_settings()
    app.add_middleware(
        Admission,
        limit=settings.max_concurrent_requests,
        per_key=settings.max_concurrent_requests_per_key,
        heavy_per_key=settings.max_heavy_requests_per_key,
    )
    app.add_middleware(RequestGuard)  # limits, authentication and rate limits before the body is read
    app.add_middleware(ErrorScrubber)  # outermost: no exception message (maybe personal data) reaches the log
    app.include_router(meta_router)
    app.include_router(submit_router(kinds))
    app.include_router(audits_router)
    for router in kinds.routers():
        app.include_router(router)
    # Routers of features that are not audit kinds are included here, one line each.
    app.include_router(forget_set_router())  # its policy enum: the policies registered now (app/policies.py)
    app.include_router(rectification_set_router)
    app.include_router(privacy_router)
    app.include_router(evidence_router)
    app.include_router(batches_router)
    app.include_router(requests_router)
    mount_dashboard(app)  # the web dashboard under /ui/ (app/ui)
    mount_docs(app)  # GET / -> /ui/, and /docs offline
    install_openapi(app, {kind.create.__name__: kind.own_models for kind in kinds.values()}, tuple(kinds))
    return app


app = create_app()
