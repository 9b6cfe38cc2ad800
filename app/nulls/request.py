"""The request of the `null` audit kind."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.nulls.schemas import SubjectAuditOptions

Method = Literal["auto", "full", "pseudo"]


class NullAuditCreate(BaseModel):
    """Compute the null of a subject-audit configuration: K fictitious people whose names fit their facts, audited
    like real subjects. Subject audits trigger these themselves when first read; submit one to precompute or to
    retry a failed one."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["null"]
    model: str = Field(min_length=1, max_length=300, description="A registered model name or hf:<id-or-path>")
    properties: list[str] = Field(min_length=1, max_length=64, description="Catalog property ids, e.g. ['P27']")
    options: SubjectAuditOptions = Field(
        default_factory=SubjectAuditOptions,
        description="The subject-audit configuration to calibrate; `seed` seeds the fictitious cohort, the"
        " contextualized-canary options are ignored (context does not enter share, strict or lenient)",
    )
    method: Method = Field(
        default="auto",
        description="full: one null fact per fictitious person; pseudo: every scored candidate of a person stands in"
        " as the truth (many null facts per person, valid only where the name says nothing about the value);"
        " auto: full where the name hints at the value (citizenship, birthplace, language, gender, name parts)",
    )
    facts_per_property: int | None = Field(
        default=None,
        ge=1,
        le=20_000,
        description="Null facts wanted per property (default: the server's setting; p <= 0.01 needs at least 99; a"
        " full null has one per person, and its people are the hand-written roster's: at most 775)",
    )
    min_people: int | None = Field(
        default=None, ge=1, le=2000, description="At least this many people with pseudo-truths (default: setting)"
    )
