"""Subject-audit results: per subject-property outcome, its counterfactual set, canaries and candidate scores."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.base import Base, JSONType


class FactResult(Base):
    """Outcome for one (audit, property): ground truths G ranked against the counterfactuals."""

    __tablename__ = "fact_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), index=True)
    property_id: Mapped[str] = mapped_column(String(16))
    fact_ids: Mapped[list[int]] = mapped_column(JSONType)  # the ground-truth facts (multi-valued)
    share: Mapped[float] = mapped_column(Float)  # share of templates whose top candidate is a ground truth
    strict: Mapped[bool] = mapped_column(Boolean)  # every template rank 1
    lenient: Mapped[bool] = mapped_column(Boolean)  # some template rank 1
    z_star: Mapped[float | None] = mapped_column(Float)  # z̄*: mean z* over rank-1 templates (null: none)
    n_templates: Mapped[int] = mapped_column(Integer)
    # the verdict statistic (mean truth z over templates) and the fact's shape, which its null must match;
    # null on results stored before they existed (their verdict says `uncalibrated`)
    statistic: Mapped[float | None] = mapped_column(Float)
    n_values: Mapped[int | None] = mapped_column(Integer)  # m: true values ranked together (merged included)
    in_pool: Mapped[bool | None] = mapped_column(Boolean)  # every true value is a value of the counterfactual pool
    # mode generation (issue 41): the prompts, each sampled answer and its reading, the counts per kind and what the
    # fact cost (workers.jobs.asking.fact_record); null for a fact probed by scoring
    generation: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    # misattribution (core.measures.misattribution): the best false candidate's mean soft lead over the templates
    # (calibrated score units) and that value; null where the fact has no false candidate or was stored before it
    misattribution: Mapped[float | None] = mapped_column(Float)
    misattributed_value: Mapped[str | None] = mapped_column(Text)

    canaries: Mapped[list[Canary]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="Canary.id"
    )
    counterfactuals: Mapped[list[CounterfactualValue]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="CounterfactualValue.position"
    )


class CounterfactualValue(Base):
    __tablename__ = "counterfactual_values"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fact_result_id: Mapped[int] = mapped_column(ForeignKey("fact_results.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    value: Mapped[str] = mapped_column(Text)


class Canary(Base):
    """One probe of a fact: a template (optionally with context) filled with the subject and each candidate."""

    __tablename__ = "canaries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fact_result_id: Mapped[int] = mapped_column(ForeignKey("fact_results.id", ondelete="CASCADE"), index=True)
    template_index: Mapped[int] = mapped_column(Integer)
    template: Mapped[str] = mapped_column(Text)  # with {subject} and {value} slots; context already prepended
    kind: Mapped[str] = mapped_column(String(16), default="baseline")  # baseline | paraphrase | context
    generic_subject: Mapped[str] = mapped_column(String(100))
    similar_names: Mapped[list[str]] = mapped_column(JSONType)
    rank: Mapped[int] = mapped_column(Integer)  # best rank of a ground truth (1 = memorized)
    lead_margin: Mapped[float] = mapped_column(Float)
    z_star: Mapped[float | None] = mapped_column(Float)  # only where a ground truth ranks 1 (the paper's z*)
    memorized: Mapped[bool] = mapped_column(Boolean)

    candidates: Mapped[list[CandidateScore]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="CandidateScore.rank"
    )


class CandidateScore(Base):
    __tablename__ = "candidate_scores"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    canary_id: Mapped[int] = mapped_column(ForeignKey("canaries.id", ondelete="CASCADE"), index=True)
    value: Mapped[str] = mapped_column(Text)
    is_ground_truth: Mapped[bool] = mapped_column(Boolean)
    nll_subject: Mapped[float] = mapped_column(Float)
    nll_generic: Mapped[float | None] = mapped_column(Float)  # null where it cancels (α = 1): not scored
    nll_similar: Mapped[list[float]] = mapped_column(JSONType)
    score: Mapped[float] = mapped_column(Float)
    rank: Mapped[int] = mapped_column(Integer)
    extra: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
