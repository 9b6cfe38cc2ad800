"""Request and response shapes for datasets and coverage audits (Di Palma et al., 2025)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.coverage.formats import Target
from app.validation import RequestModel
from core.measures.coverage import DEFAULT_BUCKETS, DEFAULT_K
from core.models import MODEL_HELP


class Problem(BaseModel):
    line: int
    reason: str


class DatasetFileRead(BaseModel):
    target: Target
    format: str
    filename: str
    mapping: dict[str, Any] = Field(description="columns (in line order) and roles (item_id, user_id, timestamp)")
    size_bytes: int
    rows: int = Field(description="well-formed records stored")
    malformed: int = Field(description="lines skipped as malformed (see problems)")
    unknown_references: int
    problems: list[Problem] = Field(description="the first problems found, by line number")


class DatasetRead(BaseModel):
    id: str
    name: str
    size_bytes: int
    created_at: datetime
    files: list[DatasetFileRead]
    links: dict[str, str]


class DatasetPage(BaseModel):
    items: list[DatasetRead]
    page: int
    page_size: int
    total: int


class DatasetDeleted(BaseModel):
    id: str
    records_deleted: int


class CoverageOptions(RequestModel):
    model_config = ConfigDict(extra="forbid")

    k: int = Field(
        default=DEFAULT_K,
        ge=0,
        le=50,
        description="Example records in the prompt (items/users: the file's first k; interactions: the user's "
        "first k). Default 3, as in the paper's code.",
    )
    sample: int | None = Field(
        default=None,
        ge=1,
        description="Probe a seeded sample of this many records (users for interactions); null probes the full file",
    )
    seed: int = Field(default=0, ge=0, description="Seed of the sample")
    buckets: int = Field(default=DEFAULT_BUCKETS, ge=1, le=20, description="Popularity quantile buckets")
    match_timestamp: bool = Field(
        default=False,
        description="interactions: also compare the timestamp (the paper compares item and rating only)",
    )
    max_new_tokens: int | None = Field(
        default=None, ge=1, le=1024, description="Generation budget (null: longest expected line in bytes + 16)"
    )
    batch_size: int = Field(default=16, ge=1, le=256, description="Prompts generated per batch")


class CoverageAuditCreate(RequestModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["coverage"]
    model: str = Field(min_length=1, max_length=300, description=f"The audited model: {MODEL_HELP}")
    dataset_id: str = Field(min_length=1, max_length=32, description="From POST /datasets")
    target: Target = Field(description="items | users | interactions: which file of the dataset to probe")
    options: CoverageOptions = Field(default_factory=CoverageOptions)


class CoverageRow(BaseModel):
    """One coverage audit of a dataset, for comparing models."""

    audit_id: str
    model: str
    target: str
    status: str
    k: int | None
    probed: int | None
    matched: int | None
    coverage: float | None
    mean_char_ratio: float | None
    bucket_edges: list[float] | None
    bucket_coverage: list[float] | None
    finished_at: datetime | None


class CoverageComparison(BaseModel):
    dataset_id: str
    rows: list[CoverageRow]
