"""Request and response shapes of verification audits, and the one list of verification statuses."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.validation import RequestModel
from core.models import MODEL_HELP

# forget-set records in one request (300 people of 5 facts): with its other lists, a body of the largest valid size
# stays under the 50,000 JSON values any audit's body may hold (app/audits/body.py); more: several verifications,
# or a batch (people.batch_id)
MAX_RECORDS = 1_500
MAX_PEOPLE = 1_000  # people (forgotten + locality) in one verification
MAX_RELEARNED = 50  # people whose forget-set facts the relearning probe fine-tunes on
MAX_NAME_NEIGHBOURS = 200  # name neighbours added to the locality people of one verification


class FactStatus(StrEnum):
    """A fact's status after verification (the one list: API, page, CLI and export read it)."""

    REMOVED = "removed"  # retrievable before (p <= max_p), not after
    STILL_RETRIEVABLE = "still retrievable"  # retrievable after (p <= max_p against the after model's null)
    INCONCLUSIVE = "inconclusive"  # no verdict either way: see the fact's reason


class PersonRole(StrEnum):
    FORGOTTEN = "forgotten"  # a person of the forget set: its forget-set facts are checked
    LOCALITY = "locality"  # an untouched person: its facts must stay


class ForgetRecord(RequestModel):
    """One forget-set record as `GET /forget-set` writes it (format jsonl or tofu): only these fields are read,
    the others (names, values, sentences) are ignored and never stored. Send only these (`memaudit verify` does):
    a body counts every JSON value it holds against its limit."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, strict=True)

    subject_id: int = Field(ge=1, le=2**63 - 1)
    property: str = Field(min_length=2, max_length=20, pattern=r"^P[1-9][0-9]*$")
    audit_id: str | None = Field(default=None, max_length=32, description="the before audit the record came from")
    templates: list[int] | None = Field(
        default=None,
        max_length=20,
        description="the property's template indices the export exposed (tofu records carry them): held out by"
        " the probe; absent: the templates the before audit probed",
    )


class PeopleIn(RequestModel):
    """Who was forgotten: exactly one of a forget set (its records), a forget-set export by reference (the SHA-256
    of the file delivered), a batch, or subject ids."""

    forget_set: list[ForgetRecord] | None = Field(
        default=None, max_length=MAX_RECORDS, description="the forget-set records given to the unlearning pipeline"
    )
    export_sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="a forget-set export of yours, named by the SHA-256 of the file delivered (`sha256sum FILE`; the"
        " evidence record's export entry states it): its facts are verified, and the verification's evidence entries"
        " cite that export's entry",
    )
    batch_id: str | None = Field(default=None, max_length=32, description="every person of a batch (POST /batches)")
    subject_ids: list[int] | None = Field(default=None, max_length=MAX_PEOPLE, description="stored subjects")

    @model_validator(mode="after")
    def _one_source(self) -> PeopleIn:
        given = [n for n in SOURCES if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of forget_set, export_sha256, batch_id or subject_ids")
        return self


SOURCES = ("forget_set", "export_sha256", "batch_id", "subject_ids")


class LocalityIn(RequestModel):
    """Untouched people whose facts must stay retrievable (over-forgetting is measured on them and on the
    forgotten people's other facts)."""

    subject_ids: list[int] = Field(default_factory=list, max_length=MAX_PEOPLE)
    batch_id: str | None = Field(default=None, max_length=32)
    name_neighbours: int = Field(
        default=0,
        ge=0,
        le=MAX_NAME_NEIGHBOURS,
        description="add up to this many name neighbours: people you may see, audited on the before model, whose name"
        " shares a part (a first or last name) with a forgotten person's — where an unlearning that moves a name's"
        " tokens damages others (reported apart: over_forgetting_by_group.name_neighbours); 0: none",
    )


class RelearningOptions(RequestModel):
    subject_ids: list[int] = Field(
        min_length=1,
        max_length=MAX_RELEARNED,
        description="forgotten people whose texts (see `texts`) the after model is fine-tuned on; every forgotten"
        " person's forget-set facts are audited again after it",
    )
    texts: Literal["other_facts", "forget_set"] = Field(
        default="other_facts",
        description="what they are fine-tuned on: their facts outside the forget set (default; the issue's 'other"
        " facts of the person'), or their forget-set facts",
    )
    steps: int = Field(default=20, ge=1, le=200, description="fine-tuning steps")
    scope: Literal["all", "embeddings", "subject"] = Field(
        default="all",
        description="the weights fine-tuned: all of them, the input embeddings only, or `subject`: only the"
        " input-embedding rows of the relearned people's name tokens (the weights an unlearning that moves a name's"
        " tokens changed; docs/verification.md)",
    )
    lr: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        description="learning rate (default: 0.001 for `all` and `embeddings`, 0.03 for `subject`: measured on"
        " groundtruth-tiny, docs/verification.md)",
    )


class VerificationOptions(RequestModel):
    max_p: float = Field(
        default=0.01, gt=0.0, le=0.5, description="the verdict's threshold: retrievable = p <= max_p against the null"
    )
    held_out: bool = Field(default=True, description="probe the templates the forget set did not expose")
    held_out_templates: int = Field(default=3, ge=1, le=20, description="held-out templates probed per fact")
    relearning: RelearningOptions | None = Field(
        default=None, description="the relearning probe (transformers-directory models only; else `unavailable`)"
    )


class VerificationAuditCreate(RequestModel):
    kind: Literal["verification"]
    model: str = Field(min_length=1, max_length=300, description=f"The after (unlearned) model: {MODEL_HELP}")
    before: str = Field(min_length=1, max_length=300, description="The before model, whose subject audits are redone")
    people: PeopleIn
    locality: LocalityIn = Field(default_factory=LocalityIn)
    options: VerificationOptions = Field(default_factory=VerificationOptions)


class VerificationStored(BaseModel):
    """What the audit row keeps as options (ids and settings only) and the job reads."""

    model_config = ConfigDict(extra="forbid")

    before: str
    source: Literal["forget_set", "export", "batch", "subjects"]
    # people.export_sha256's entry: {"seq", "sha256"} (set when the people are read)
    export: dict[str, Any] | None = None
    max_p: float = 0.01
    held_out: bool = True
    held_out_templates: int = 3
    relearning: dict[str, Any] | None = None


class Side(BaseModel):
    audit_id: str | None = Field(description="the subject audit (before) or null (after: run by the verification)")
    p_value: float | None
    memorized: bool | None = Field(description="p <= max_p (null: no p-value, see the fact's reason)")
    templates_retrieved: int = Field(description="templates that rank a true value first")
    n_templates: int


class HeldOutRead(BaseModel):
    templates: list[int] = Field(description="the property's template indices probed (none the forget set exposed)")
    before_retrieved: int
    after_retrieved: int
    paired_p: float | None = Field(description="exact McNemar, one-sided (fewer retrieved after)")
    chance: float = Field(description="a template's chance of ranking a true value first: true values / candidates")


class ContextRead(BaseModel):
    before_retrieved: bool = Field(
        description="the before audit's contextualized canary (the person's other known facts, then the baseline)"
        " ranked a true value first"
    )
    after_retrieved: bool = Field(description="the same canary, on the after model")
    chance: float = Field(description="its chance of ranking a true value first: true values / candidates")


class RelearningRead(BaseModel):
    relearned: bool = Field(description="this person's forget-set facts were the fine-tuning texts")
    p_value: float | None = Field(description="after relearning, against the after model's null")
    came_back: bool | None = Field(description="p <= max_p after relearning (null: no p-value)")
    templates_retrieved: int


class VerificationFactRead(BaseModel):
    subject_id: int
    role: PersonRole
    property: str
    label: str
    target: bool = Field(description="in the forget set (else a locality fact: it must stay)")
    status: FactStatus
    reason: str | None = Field(description="why inconclusive")
    before: Side
    after: Side
    paired_p: float | None = Field(
        description="exact McNemar over the templates' rank-1 outcomes, before vs after (one-sided: fewer after)"
    )
    held_out: HeldOutRead | None = None
    context: ContextRead | None = Field(
        default=None, description="the context probe: only when the before audit had contextualized canaries"
    )
    relearning: RelearningRead | None = None


class ExportRef(BaseModel):
    seq: int = Field(description="the forget-set export's entry in the evidence record")
    sha256: str = Field(description="the SHA-256 of the file that export delivered")


class VerificationPage(BaseModel):
    audit_id: str
    status: str
    before: str
    after: str
    export: ExportRef | None = Field(default=None, description="the export verified (people.export_sha256), if named")
    summary: dict[str, Any] | None = Field(
        description="counts per status, removed and kept rates, over-forgetting, the probes; null until it ends"
    )
    facts: list[VerificationFactRead]
    total: int
    page: int
    page_size: int
