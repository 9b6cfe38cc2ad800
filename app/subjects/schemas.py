"""Request and response shapes for subject audits (WikiMem)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, computed_field, field_validator

from app.nulls.schemas import CalibrationInfo, FactCalibration, MisattributionRead, SubjectAuditOptions
from app.validation import LIMIT_KEY, RequestModel
from core.catalog import load_catalog
from core.models import MODEL_HELP


class FactIn(RequestModel):
    model_config = ConfigDict(extra="forbid")

    property: str = Field(
        description="Wikidata property id from the catalog, e.g. P106 (occupation)",
        examples=["P106"],
        json_schema_extra=lambda schema: schema.update(enum=sorted(load_catalog().pids)),  # the document lists them
    )
    value: str = Field(min_length=1, max_length=300, description="The true value, e.g. 'physicist'")


class SubjectIn(RequestModel):
    """Either the facts themselves (a person outside Wikidata), or a Wikidata id whose catalog facts are
    fetched (from an imported dump if the person is there, else from the Wikidata API), or both."""

    # The document says what the validators below enforce: a wikidata_id, or a name and facts.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [
                {"required": ["wikidata_id"], "properties": {"wikidata_id": {"type": "string"}}},
                {"required": ["name", "facts"], "properties": {"name": {"type": "string"}, "facts": {"minItems": 1}}},
            ]
        },
    )

    wikidata_id: str | None = Field(default=None, pattern=r"^Q[1-9][0-9]{0,11}$", description="e.g. Q937")
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"\S",
        validate_default=True,
        description="The person's name as the model would see it (default with wikidata_id: the English label)",
    )
    facts: list[FactIn] = Field(
        default_factory=list,
        validate_default=True,
        json_schema_extra={LIMIT_KEY: {"maxItems": "max_facts_per_subject"}},
        description="The facts to probe (property + value); empty with a wikidata_id: fetched from Wikidata",
    )

    @field_validator("name")
    @classmethod
    def _name_or_wikidata(cls, name: str | None, info: ValidationInfo) -> str | None:
        if name is None and info.data.get("wikidata_id") is None:
            raise ValueError("give the subject's name (it can only be looked up with a wikidata_id)")
        return name

    @field_validator("facts")
    @classmethod
    def _facts_or_wikidata(cls, facts: list[FactIn], info: ValidationInfo) -> list[FactIn]:
        if not facts and info.data.get("wikidata_id") is None:
            raise ValueError("give the subject's facts, or a wikidata_id to fetch them from Wikidata")
        return facts


@dataclass(frozen=True)
class Person:
    """One person of a batch's roster, validated (app/batches/roster.py): what add_subject_audits stores."""

    row: int
    name: str
    wikidata_id: str | None
    facts: tuple[tuple[str, str], ...]  # (property id, value in the catalog's spelling)


class SubjectAuditCreate(RequestModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["subject"]
    model: str = Field(min_length=1, max_length=300, description=f"The audited model: {MODEL_HELP}")
    subject: SubjectIn
    options: SubjectAuditOptions = Field(default_factory=SubjectAuditOptions)
    # Facts fetched for a wikidata_id before the request's transaction (app.subjects.service.prefetch_subject).
    _fetched: Any = PrivateAttr(default=None)


class CandidateRead(BaseModel):
    value: str
    is_ground_truth: bool
    rank: int
    score: float
    sentence: str
    nll_subject: float
    generic_sentence: str
    nll_generic: float | None = Field(
        description="NLL of the generic-subject sentence; null where α = 1, since it cancels from s exactly"
    )
    similar_sentences: list[str]
    nll_similar: list[float]
    near_duplicate_of: str | None = Field(
        default=None, description="A counterfactual merged with this true value (cosine > threshold): counted as true"
    )
    cosine: float | None = None


class CanaryRead(BaseModel):
    template_index: int
    kind: str
    template: str
    rank: int
    memorized: bool = Field(
        description="Deprecated (until the next release): rank1. Not the verdict: a true value ranks first under this"
        " template",
        json_schema_extra={"deprecated": True},
    )
    lead_margin: float
    z_star: float | None = Field(description="z*, defined only where a true value ranks first (else null)")
    generic_subject: str
    similar_names: list[str]
    candidates: list[CandidateRead] | None = None

    @computed_field(description="A true value ranks first under this template (WikiMem's reading; not the verdict)")
    @property
    def rank1(self) -> bool:
        return self.memorized


class AnswerRead(BaseModel):
    """One sampled answer (mode generation) and how it was read."""

    text: str = Field(description="The answer as generated (up to its first newline)")
    kind: Literal["true", "other", "refusal", "unreadable"] = Field(
        description="true: it names a true value (or a near-duplicate merged into one); other: another value (value"
        " says which); refusal: the model declined or said it does not know; unreadable: none of these"
    )
    value: str | None = Field(default=None, description="The value it names (true, other)")


class PromptAnswersRead(BaseModel):
    template_index: int | None = Field(
        description="The template whose text before the value was continued; null: the question"
    )
    form: Literal["completion", "chat"]
    prompt: str = Field(description="The prompt as sent (the completion's text, or the chat question)")
    samples: list[AnswerRead] = Field(default_factory=list, description="Its answers (none where asking failed)")


class GenerationRead(BaseModel):
    """What the model said when asked about this fact (mode generation): every prompt and answer, read."""

    options: dict[str, Any] = Field(description="How it was asked (options.generation)")
    counts: dict[str, int] = Field(description="Answers of each kind: true, other, refusal, unreadable")
    most_said_other: str | None = Field(description="The other value answered most often (none: no other value)")
    cost: dict[str, int] = Field(description="queries: prompts sent for this fact; samples: answers read")
    prompts: list[PromptAnswersRead]
    error: str | None = Field(
        default=None,
        description="Why the model could not be asked about this fact (its endpoint's error after the retries);"
        " the fact then has no verdict, the audit's other facts are kept",
    )


class FactResultRead(BaseModel):
    property: str
    label: str
    special_category: str | None = Field(
        default=None,
        description="The GDPR special category (Art. 9(1); Art. 10) the property's values fall under, if any",
    )
    values: list[str]
    share: float = Field(description="Share of templates whose top-ranked candidate is a true value")
    strict: bool = Field(
        description="Deprecated (until the next release): rank1_all", json_schema_extra={"deprecated": True}
    )
    lenient: bool = Field(
        description="Deprecated (until the next release): rank1_any", json_schema_extra={"deprecated": True}
    )
    z_star: float | None = Field(
        description="z̄*: mean z* over the templates that rank a true value first; null when none does"
    )
    n_templates: int
    counterfactuals: list[str]
    canaries: list[CanaryRead]
    mode: Literal["scoring", "generation"] = Field(
        default="scoring",
        description="How the fact was probed: scoring (canaries ranked by log-probability) or generation (answers"
        " sampled and read: `answers`; share is then the share of answers that give a true value)",
    )
    answers: GenerationRead | None = Field(default=None, description="Mode generation: what the model said")
    calibration: FactCalibration | None = Field(
        default=None, description="p-value and false-positive rates from the matching null (see `calibration`)"
    )
    misattribution: MisattributionRead | None = Field(
        default=None,
        description="The false value the model prefers most for this person, judged by the same null (Art. 16:"
        " rectification); null until the fact's null is ready",
    )

    @computed_field(
        description="special: the property is a special category of personal data (special_category), where a value"
        " memorized or asserted falsely harms most; ordinary otherwise"
    )
    @property
    def severity(self) -> Literal["special", "ordinary"]:
        return "special" if self.special_category else "ordinary"

    @computed_field(description="Some template ranks a true value first (WikiMem's lenient reading; not the verdict)")
    @property
    def rank1_any(self) -> bool:
        return self.lenient

    @computed_field(description="Every template ranks a true value first (WikiMem's strict reading; not the verdict)")
    @property
    def rank1_all(self) -> bool:
        return self.strict


class FactsPage(BaseModel):
    audit_id: str
    subject_id: int | None
    detail: Literal["summary", "candidates"]
    facts: list[FactResultRead]
    calibration: CalibrationInfo | None = Field(
        default=None,
        description="The default policy and which null (audit id, K people, look-alikes) produced the"
        " verdicts; null until the audit has succeeded",
    )
    provenance: dict[str, Any] | None = Field(
        default=None,
        description="What produced these results (schema memaudit.provenance/1), as on GET /audits/{id}",
    )


class SubjectRead(BaseModel):
    id: int
    wikidata_id: str | None
    facts: int


Detail = Literal["summary", "candidates"]
