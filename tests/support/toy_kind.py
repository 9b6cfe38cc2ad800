"""A fifth audit kind, written the way a new kind is written, without touching app/audits or app/ui: a create schema,
an options schema, a prepare step, a job, a router with its result page, its section of the dashboard's audit page
(a builder and a template kept beside this file), and the KIND that ties them together.

The toy audit counts the words of its texts (``repeat`` times, reporting progress as it goes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from app.audits.kinds import AuditKind, KindPage
from app.audits.service import visible_audit_of_kind
from app.db.models import Audit
from app.deps import CurrentPrincipal, SessionDep
from app.errors import InvalidInput
from app.settings import Settings
from workers.jobs.common import JobContext, run_audit_job

NAME = "toy"


class ToyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repeat: int = Field(default=1, ge=1, le=5)


class ToyAuditCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["toy"]
    model: str = Field(default="toy-counter", max_length=300)
    texts: list[str] = Field(min_length=1, max_length=20)
    options: ToyOptions = Field(default_factory=ToyOptions)


def prepare(session: Session, body: ToyAuditCreate, audit: Audit, settings: Settings) -> None:
    """Checks the body against what only the service knows; here: no empty text."""
    for i, text in enumerate(body.texts):
        if not text.split():
            raise InvalidInput(f"texts[{i}]", "a text has no words; give at least one word")
    audit.progress_total = len(body.texts)


def stored_options(body: ToyAuditCreate) -> dict[str, Any]:
    return {**body.options.model_dump(mode="json"), "texts": body.texts}


class ToyStored(ToyOptions):
    texts: list[str]


def run(audit_id: str) -> None:
    run_audit_job(audit_id, NAME, ToyStored, _count)


def _count(ctx: JobContext[ToyStored]) -> dict[str, Any]:
    words = 0
    for done, text in enumerate(ctx.options.texts, start=1):
        words += len(text.split()) * ctx.options.repeat
        ctx.progress(done, len(ctx.options.texts), force=True)
    return {"words": words}


router = APIRouter(tags=["toy"])


@router.get("/audits/{audit_id}/words")
def words(audit_id: str, session: SessionDep, principal: CurrentPrincipal) -> dict[str, Any]:
    audit = visible_audit_of_kind(session, principal, audit_id, NAME)
    return {"audit_id": audit.id, "status": audit.status, "words": (audit.summary or {}).get("words")}


def page(session: Session, principal: Any, audit: Audit, page_number: int) -> dict[str, Any]:
    """The dashboard's section for a finished toy audit: its texts and the words counted."""
    return {"words": (audit.summary or {}).get("words"), "texts": (audit.options or {}).get("texts", [])}


KIND = AuditKind(
    name=NAME,
    create=ToyAuditCreate,
    options=ToyStored,
    prepare=prepare,
    job="tests.support.toy_kind.run",
    routers=(router,),
    links=lambda audit: {"words": "words"},
    stored_options=stored_options,
    own_models=("toy-counter",),
    page=KindPage(
        page, str(Path(__file__).with_name("toy_page.html")), about="A toy audit counts the words of its texts."
    ),
)
