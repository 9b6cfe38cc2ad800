"""Response shapes shared by every audit kind (the request bodies live with each kind)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from app.db.models.audit import AuditStatus


class Progress(BaseModel):
    done: int
    total: int


class AuditRead(BaseModel):
    id: str
    kind: str
    model: str
    status: AuditStatus
    progress: Progress
    options: dict[str, Any]
    summary: dict[str, Any] | None
    error: str | None
    subject_id: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    links: dict[str, str]
    provenance: dict[str, Any] | None = Field(
        default=None,
        description="What produced the result (schema memaudit.provenance/1): memaudit version and git commit, "
        "Python, torch, transformers, the scorer backend and its settings, the model fingerprint, and per property "
        "the null (audit id, configuration key). Written by the worker when the run ends; null before that",
    )


class AuditCreated(AuditRead):
    subject_token: str | None = Field(
        default=None,
        description="Audits about one data subject: a token that reads this audit only (hand it to the data subject)",
    )


class AuditPage(BaseModel):
    items: list[AuditRead]
    page: int
    page_size: int
    total: int
