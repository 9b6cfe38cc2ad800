"""Response shapes of null calibration: calibrated verdicts, which null produced them, cohort statistics; and the
options of a subject audit (``SubjectAuditOptions``), which a null copies to audit its fictitious people alike
(app.subjects.schemas re-exports them with the subject audit's body)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, computed_field, model_serializer

from app.validation import RequestModel
from core import defaults
from core.measures.wikimem import NEAR_DUPLICATE_THRESHOLD

Status = Literal["ready", "pending", "failed", "missing", "uncalibrated"]


class RateRead(BaseModel):
    rate: float
    k: int
    n: int
    ci95: tuple[float, float] = Field(description="Clopper–Pearson 95 % interval")


class NullProgress(BaseModel):
    """A pending null's progress, in sentences scored, and the time left at its rate so far."""

    done: int
    total: int
    eta_seconds: float | None = Field(default=None, description="None until the null has scored something")


class NullRef(BaseModel):
    """Which null produced a verdict."""

    property: str
    status: Status
    null_audit_id: str | None
    people: int | None = Field(default=None, description="K fictitious people")
    null_facts: int | None = None
    method: str | None = None
    lookalikes: str | None = None
    source: Literal["computed", "shipped", "imported"] | None = Field(
        default=None, description="computed here, shipped with memaudit (docs/measures.md), or imported from a file"
    )
    progress: NullProgress | None = Field(default=None, description="pending: how far the null is, and its ETA")
    message: str | None = Field(default=None, description="missing: why there is no null, and how to create it")


class NullShape(BaseModel):
    """The shape of null facts a verdict was compared against: it must be the fact's own."""

    n_values: int = Field(description="m: true values ranked together (near-duplicates merged into a truth included)")
    in_pool: bool = Field(description="every true value is a value of the counterfactual pool")
    statistic: str = Field(description="the verdict statistic (truth-z-1: mean truth z over templates)")
    null_facts: int | None = Field(default=None, description="null facts of this shape")
    judgments: int = Field(
        default=1,
        description="2 for a fact with values in and out of the pool: its pool values alone were judged against"
        " in-pool null facts of their number, the whole fact against out-of-pool null facts, and p_value is the"
        " weighted Bonferroni min(p_pool / 0.9, p_whole / 0.1); this shape is the judgment that gave it",
    )


class FactCalibration(BaseModel):
    status: Status = Field(
        description="ready: from the matching null; pending: the null is being computed; failed: it failed;"
        " missing: no null exists for this configuration (message says how to create one); uncalibrated: no null"
        " covers this fact's shape (message says why), so there is no p-value and no default verdict"
    )
    null_audit_id: str | None = None
    p_value: float | None = Field(
        default=None,
        description="(1 + null facts whose statistic is at least this fact's) / (1 + null facts), over the null"
        " facts of this fact's shape; where fewer than 10 reach it, from a generalized Pareto tail fitted to the"
        " null (p_method); a fact with values in and out of the pool is judged twice (null_shape.judgments)",
    )
    p_method: Literal["empirical", "tail"] | None = Field(default=None, description="how the p-value was computed")
    statistic: float | None = Field(
        default=None,
        description="the verdict statistic: the best true value's calibrated score in counterfactual standard"
        " deviations above their mean, averaged over templates (truth z)",
    )
    null_mean: float | None = Field(default=None, description="the statistic's mean over the null facts of this shape")
    null_shape: NullShape | None = None
    fpr: dict[str, RateRead] | None = Field(
        default=None,
        description="False-positive rate on the null of each policy: lenient, strict, share (share ≥ this fact's),"
        " pvalue (p ≤ the default threshold)",
    )
    memorized: bool | None = Field(default=None, description="Selected by the default policy (p ≤ max_p)")
    message: str | None = Field(default=None, description="Why there is no verdict (missing), and what to do")
    caveat: str | None = Field(
        default=None,
        description="What is known to be wrong with this p-value: on citizenship, birthplace and languages the null's"
        " rate holds within a factor of two at p <= 0.01 for people with ordinary names of their country, lenient"
        " thresholds understate it, and names of a tradition outside the null's 51 origins are flagged more often"
        " (docs/measures.md, 'Typical names')",
    )


class MisattributionRead(BaseModel):
    """Does the model prefer a specific false value for this person (GDPR Art. 16)? docs/measures.md,
    "Misattribution"."""

    value: str | None = Field(
        default=None,
        description="The false value the model prefers most. Scoring: the candidate with the best mean soft lead over"
        " the true values and the other candidates across the templates; generation: the false value its answers"
        " name most often (null where none names one). Label variants of a true value (the near-duplicate rule) are"
        " never it",
    )
    statistic: float | None = Field(
        default=None,
        description="Scoring: that value's mean soft lead over the templates, s(u) - log(sum of exp(s(v)) over every"
        " other candidate v, true values included), in calibrated score units (> 0: it outweighs all the others"
        " together). Generation: the share of the answers that name it, plus a tie-breaker below 1e-4",
    )
    p_value: float | None = Field(
        default=None,
        description="(1 + null facts whose misattribution statistic is at least this one) / (1 + null facts), over"
        " the fictitious people's facts of this fact's shape in the verdict's null (the same mode), one per person"
        " (empirical: no fitted tail; in mode generation a null fact with the same share of answers counts as at"
        " least this one)",
    )
    misattributed: bool | None = Field(default=None, description="p_value <= the audit's max_p (0.01)")
    namesake: bool | None = Field(
        default=None,
        description="Misattributed facts only: true when the false value is a true value of another person sharing a"
        " given or family name with this one (case and accents folded) among the stored subjects of the same owner"
        " (the audit's cohort, its batches): the model seems to confuse them. No other person is named",
    )
    uncalibrated: bool = Field(default=False, description="No null judges this statistic (reason says why)")
    reason: str | None = None


class CalibrationInfo(BaseModel):
    policy: str = Field(description="The default verdict: p ≤ max_p against the matching null")
    max_p: float
    nulls: list[NullRef]


class CohortNumbers(BaseModel):
    subjects: int
    facts: int
    mean_memorization: float | None = Field(description="M̄: mean share of rank-1 templates over facts")
    strict: float | None = Field(
        description="Deprecated (until the next release): rank1_all", json_schema_extra={"deprecated": True}
    )
    lenient: float | None = Field(
        description="Deprecated (until the next release): rank1_any", json_schema_extra={"deprecated": True}
    )
    z_star: float | None = Field(description="z̄*: mean z* over rank-1 templates")
    zero_memorization: float | None = Field(description="H_{M=0}: share of subjects with no true value at rank 1")
    memorized: float | None = Field(
        default=None, description="share of facts memorized: selected by the default policy (p <= 0.01)"
    )
    misattributed: float | None = Field(
        default=None,
        description="share of facts misattributed (a specific false value preferred, p <= 0.01: the facts'"
        " `misattribution`), over the facts whose misattribution has a p-value; null where none has (the null's"
        " side: at most 0.01 by construction of its empirical p-values)",
    )

    @computed_field(description="share of facts a template ranks first (WikiMem's lenient reading; not the verdict)")
    @property
    def rank1_any(self) -> float | None:
        return self.lenient

    @computed_field(description="share of facts every template ranks first (WikiMem's strict reading; not the verdict)")
    @property
    def rank1_all(self) -> float | None:
        return self.strict


class CohortStatsRead(BaseModel):
    audits: list[str]
    cohort: CohortNumbers
    null: CohortNumbers | None = Field(
        description="The same numbers on the null (fictitious people), or null when"
        " some property's null is not ready yet"
    )
    per_property: dict[str, dict[str, float | int | None]]
    calibration: CalibrationInfo


class NullImported(BaseModel):
    """The null audit an imported artifact became (or was already)."""

    null_audit_id: str
    created: bool = Field(description="false: this file was imported before; its null audit is returned")


class GenerationOptions(RequestModel):
    """How a subject audit in mode ``generation`` asks the model (ignored in mode ``scoring``); a null of fictitious
    people is asked the same way (these options are part of its key)."""

    model_config = ConfigDict(extra="forbid")

    samples: int = Field(
        default=defaults.GENERATION_SAMPLES,
        ge=1,
        le=100,
        description=f"K: answers sampled per prompt (default {defaults.GENERATION_SAMPLES})",
    )
    templates: int = Field(
        default=defaults.GENERATION_TEMPLATES,
        ge=1,
        le=11,
        description=f"Templates asked in completion form: the baseline and the next paraphrases (default"
        f" {defaults.GENERATION_TEMPLATES}: with 3, groundtruth-tiny's held-out people were flagged at 4.5 % at"
        " p <= 0.01, the baseline alone at 1.5 %; docs/measures.md, 'Generation mode'); `paraphrases` is scoring's",
    )
    temperature: float = Field(
        default=defaults.GENERATION_TEMPERATURE, ge=0.0, le=2.0, description="Sampling temperature (0: greedy)"
    )
    max_tokens: int = Field(
        default=defaults.GENERATION_MAX_TOKENS,
        ge=1,
        le=256,
        description="Tokens per answer at most (an answer ends at its first newline)",
    )
    form: Literal["completion", "chat"] = Field(
        default=defaults.GENERATION_FORM,
        description="completion: each probed template's text before the value, with the person's name, continued;"
        " chat: the property's question ('What is X's occupation?'), through the model's chat template where it"
        " has one (else its completion prompt)",
    )


class SubjectAuditOptions(RequestModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["scoring", "generation"] = Field(
        default=defaults.MODE,
        description="scoring: rank the true value among counterfactuals by the log-probability of whole sentences;"
        " generation: ask the model (options.generation) and count the answers that give a true value, judged by a"
        " null of fictitious people asked the same way (for models that only answer, e.g. chat endpoints)",
    )
    generation: GenerationOptions = Field(
        default_factory=GenerationOptions, description="How mode generation asks (ignored in mode scoring)"
    )

    @model_serializer(mode="wrap")
    def _scoring_as_before(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A scoring audit's options are dumped (and stored, and shipped in null files) as before generation mode
        existed: without ``mode`` and ``generation``, so their bytes and hashes do not change."""
        data = handler(self)
        if self.mode == "scoring":
            data.pop("mode", None)
            data.pop("generation", None)
        return data

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
    seed: int = Field(
        default=0,
        ge=0,
        description="Seed of the counterfactual draw and of generation's sampling (stored for reproduction)",
    )
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
