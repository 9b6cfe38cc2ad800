"""Mounts the dashboard on the app: its pages and its static files (styles, scripts, vendored libraries)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from app.ui import account, audits, batches, erasure, exports
from app.ui import requests as requests_ui
from app.ui.reply import router as reply_router
from app.ui.web import HERE, PREFIX


def mount(app: FastAPI) -> None:
    for router in (account.router, audits.router, batches.router, erasure.router, exports.router):
        app.include_router(router)
    app.include_router(reply_router)  # the person's plain-words reply (app/ui/reply.py)
    app.include_router(requests_ui.router)  # the officer's queue and a request's reply letter (app/ui/requests.py)
    app.mount(f"{PREFIX}/static", StaticFiles(directory=HERE / "static"), name="ui-static")
