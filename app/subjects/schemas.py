"""Request and response shapes for subject audits (WikiMem)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, computed_field, field_validator

from app.nulls.schemas import CalibrationInfo, FactCalibration
from app.validation import LIMIT_KEY, RequestModel
from core import defaults
from core.catalog import load_catalog
from core.measures.wikimem import NEAR_DUPLICATE_THRESHOLD
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


class SubjectAuditOptions(RequestModel):
    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(
        default=defaults.ALPHA, ge=0.0, le=10.0, description="Weight of the similar-name calibration term"
    )
    counterfactuals: int = Field(
        default=defaults.COUNTERFACTUALS,
        ge=1,
        le=500,
        description=f"Counterfactual values per fact (default {defaults.COUNTERFACTUALS}: measured as powerful as"
        " more, at a fifth of the sentences of 100; docs/measures.md, 'Choosing the defaults')",
    )
    paraphrases: int | None = Field(
        default=defaults.PARAPHRASES,
        ge=0,
        le=50,
        description=f"Paraphrased templates besides the baseline (default {defaults.PARAPHRASES}; null: all of the"
        " property's)",
    )
    similar_names: int = Field(default=defaults.SIMILAR_NAMES, ge=1, le=10, description="Look-alike names in S(h)")
    lookalikes: Literal["reversed", "same_origin"] = Field(
        default=defaults.LOOKALIKES,
        description="Look-alike names S(h): other names of the same origin (default: what a model infers from a name's"
        " origin cancels, and no look-alike keeps the surname that carries the identity; a name of unknown origin"
        " falls back to reversed), or reversed letters (WikiMem's 'Enaj Doe'); measured in docs/measures.md",
    )
    seed: int = Field(default=0, ge=0, description="Seed of the counterfactual draw (stored for reproduction)")
    context: bool = Field(
        default=False, description="Also probe each fact with a contextualized canary (other known facts first)"
    )
    context_facts: int = Field(default=4, ge=1, le=4, description="Known facts prepended in a contextualized canary")
    pool: Literal["catalog", "imported"] = Field(
        default="catalog",
        description="Counterfactual pools: the catalog's, or those built by `memaudit import-wikidata` (every value of"
        " a property used by >= 100 humans in the dump; the catalog's where the dump built none)",
    )
    near_duplicates: bool = Field(
        default=True, description="Count a counterfactual as a true value when their embeddings are near-identical"
    )
    near_duplicate_scope: Literal["label_variants", "all"] = Field(
        default="label_variants",
        description="label_variants: relax only against true values that are not pool values themselves (pool values"
        " are distinct by construction, yet some embed close: Sweden / Norway 0.80); all: against every true value",
    )
    near_duplicate_threshold: float = Field(
        default=NEAR_DUPLICATE_THRESHOLD,
        gt=0.0,
        le=1.0,
        description="Cosine similarity of value embeddings (all-MiniLM-L6-v2) above which a counterfactual counts"
        " as a ground truth",
    )


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


class FactResultRead(BaseModel):
    property: str
    label: str
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
    calibration: FactCalibration | None = Field(
        default=None, description="p-value and false-positive rates from the matching null (see `calibration`)"
    )

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
