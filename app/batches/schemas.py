"""Request and response shapes of batches (cohorts of subject audits)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.audits.schemas import AuditRead
from app.nulls.schemas import CohortStatsRead
from app.subjects.schemas import SubjectAuditOptions
from app.validation import RequestModel
from core.models import MODEL_HELP

MAX_MODELS = 5  # models compared on one roster in one request


class BatchCreate(RequestModel):
    """A roster as JSON. The same fields come as multipart form fields with an uploaded file (`roster`, CSV or
    JSON lines): `model` (repeat it to compare models) and `options` (a JSON object)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, min_length=1, max_length=300, description=f"The model: {MODEL_HELP}")
    models: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_MODELS,
        description="Several models (model comparison): every person is audited on each",
    )
    options: SubjectAuditOptions = Field(default_factory=SubjectAuditOptions)
    people: list[Any] = Field(
        min_length=1,
        description="One object per person: name, optional wikidata_id, and facts as [{property, value}] or as"
        ' property-id keys ({"P106": "physicist"}); at most MEMAUDIT_MAX_BATCH_SIZE',
    )

    @model_validator(mode="after")
    def _one_way_to_name_models(self) -> BatchCreate:
        if (self.model is None) == (self.models is None):
            raise ValueError("give model (one model) or models (a list, to compare models), not both")
        return self

    def model_list(self) -> list[str]:
        return [self.model] if self.model is not None else list(self.models or [])


class RowErrorRead(BaseModel):
    row: int = Field(description="1-based: the JSON array's item, the CSV's data row (after the header), the line")
    field: str
    message: str


class Counts(BaseModel):
    queued: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    total: int = 0


class BatchRead(BaseModel):
    id: str
    models: list[str]
    options: dict[str, Any]
    people: int = Field(description="Roster rows accepted: one subject audit per person and model")
    rejected: int = Field(description="Roster rows left out (only with ?partial=true)")
    status: Literal["queued", "running", "finished", "cancelled"]
    progress: Counts
    per_model: dict[str, Counts]
    eta_seconds: float | None = Field(
        description="Queued and running audits / the batch's throughput so far; null until an audit has finished"
    )
    created_at: datetime
    cancelled_at: datetime | None
    links: dict[str, str]


class BatchCreated(BatchRead):
    errors: list[RowErrorRead] = Field(
        default_factory=list, description="With ?partial=true: the rows left out and why (at most 1,000 listed)"
    )


class ModelComparison(BaseModel):
    a: str
    b: str
    people: int = Field(description="People with succeeded audits on both models")
    facts: int = Field(description="Their facts (person, property) audited on both")
    only_a: int = Field(description="Facts some template ranks first (rank1_any) on model a and not on model b")
    only_b: int
    both: int


class BatchReport(BaseModel):
    batch_id: str
    cohorts: dict[str, CohortStatsRead | None] = Field(
        description="Per model, WikiMem's cohort statistics over the batch's succeeded audits and the null's rates"
        " beside them (null for a model whose succeeded audits exceed the cohort limit)"
    )
    comparison: list[ModelComparison] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class BatchAuditsPage(BaseModel):
    items: list[AuditRead]
    rows: list[int | None] = Field(description="Each item's roster row (1-based), in the same order")
    page: int
    page_size: int
    total: int
