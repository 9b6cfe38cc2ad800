"""Response shapes of null calibration: calibrated verdicts, which null produced them, cohort statistics."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field

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
