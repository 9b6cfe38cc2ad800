"""Request and response shapes of capacity audits (Morris et al., "How much do language models memorize?")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.validation import RequestModel
from core.models import MODEL_HELP

Precision = Literal["fp32", "bf16"]
SCRATCH = "scratch"  # the `model` of a uniform-mode audit: models trained from scratch by the audit itself


class Architecture(RequestModel):
    """A GPT-2-style architecture (pre-LN, GELU MLP of 4x width, tied embeddings)."""

    model_config = ConfigDict(extra="forbid")

    n_layer: int = Field(ge=1, description="transformer blocks")
    d_model: int = Field(ge=1, description="width")
    n_head: int = Field(default=1, ge=1, description="attention heads; must divide d_model")

    @model_validator(mode="after")
    def _heads_divide_width(self) -> Architecture:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_head={self.n_head}")
        return self


class CapacityGrid(RequestModel):
    """Every combination of architecture × dataset size × seed × precision is one cell, trained from scratch
    on N sequences of S tokens drawn uniformly from V (regenerated from the seed, never stored)."""

    model_config = ConfigDict(extra="forbid")

    architectures: list[Architecture] = Field(min_length=1)
    vocab_size: int = Field(default=2048, ge=2, description="V (the paper's smallest runs: 2048)")
    seq_len: int = Field(default=64, ge=1, description="S, tokens per sequence (paper: 64)")
    context: int | None = Field(
        default=None, ge=2, description="position embeddings; default S + 1 (the BOS-prefixed sequence); must be >= S"
    )
    dataset_sizes: list[int] = Field(min_length=1, description="N values; capacity is the max over them")
    seeds: list[int] = Field(default=[0], min_length=1)
    precisions: list[Precision] = Field(default=["fp32"], min_length=1)

    @model_validator(mode="after")
    def _context_holds_sequence(self) -> CapacityGrid:
        if self.context is not None and self.context < self.seq_len:
            raise ValueError(f"seq_len={self.seq_len} is longer than the context ({self.context} positions)")
        if any(n < 1 for n in self.dataset_sizes):
            raise ValueError("dataset_sizes must be positive")
        return self

    def cell_count(self) -> int:
        return len(self.architectures) * len(self.dataset_sizes) * len(self.seeds) * len(self.precisions)


class CapacityOptions(RequestModel):
    """Optimisation budget per cell: full-batch Adam by default (the paper trains to convergence)."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(default=2000, ge=1, description="optimizer steps per cell")
    lr: float = Field(default=3e-2, gt=0, le=1)
    warmup_steps: int = Field(default=20, ge=0)
    schedule: Literal["constant", "cosine"] = "constant"
    batch_size: int | None = Field(default=None, ge=1, description="null: full batch")
    heldout_size: int | None = Field(
        default=None,
        ge=1,
        description="non-members for the MIA (uniform samples); default min(N, 1000). The MIA"
        " compares as many members (a seeded sample) as non-members: balanced sets, chance F1 = 0.5",
    )
    extraction_prefix: int | None = Field(default=None, ge=0, description="greedy-extraction prefix; default S/2")
    checkpoint_seconds: float = Field(default=60.0, ge=1.0, description="how often a running cell checkpoints")


class TextInput(RequestModel):
    """Text mode: per-sample unintended memorization of the audited `model` against a reference model,
    mem_U(x) = max(0, NLL_ref(x) − NLL_model(x)) in bits. Both must share a tokenizer."""

    model_config = ConfigDict(extra="forbid")

    texts: list[str] = Field(min_length=1, description="the samples (e.g. the model's fine-tuning set)")
    reference: str = Field(max_length=300, description=f"the reference model: {MODEL_HELP}")


class CapacityAuditOptions(CapacityOptions):
    """A capacity audit's stored options, as its job receives them: the budget, the mode and the mode's input."""

    mode: Literal["uniform", "text"] = "uniform"
    grid: CapacityGrid | None = None
    reference: str | None = None


class CapacityAuditCreate(RequestModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["capacity"]
    model: str = Field(
        default=SCRATCH,
        max_length=300,
        description="uniform mode: 'scratch' (the audit trains its own models); text mode: the audited model, "
        + MODEL_HELP,
    )
    mode: Literal["uniform", "text"] = "uniform"
    grid: CapacityGrid | None = None
    options: CapacityOptions = Field(default_factory=CapacityOptions)
    text: TextInput | None = None

    @model_validator(mode="after")
    def _mode_has_its_input(self) -> CapacityAuditCreate:
        if self.mode == "uniform":
            if self.grid is None:
                raise ValueError("uniform mode needs a grid (architectures, dataset_sizes, ...)")
            if self.model != SCRATCH:
                raise ValueError(f"uniform mode trains its own models: model must be {SCRATCH!r}")
        else:
            if self.text is None:
                raise ValueError("text mode needs text.texts and text.reference")
            if self.model == SCRATCH:
                raise ValueError(f"text mode audits a model: name {MODEL_HELP}")
        return self

    def stored_options(self) -> dict[str, Any]:
        """The audit's options (CapacityAuditOptions as JSON): the budget, the mode, the grid or the reference."""
        stored = {**self.options.model_dump(mode="json"), "mode": self.mode}
        if self.mode == "uniform":
            assert self.grid is not None
            return {**stored, "grid": self.grid.model_dump(mode="json")}
        assert self.text is not None
        return {**stored, "reference": self.text.reference}


class CapacityCellRead(BaseModel):
    position: int
    n_layer: int
    d_model: int
    n_head: int
    vocab_size: int
    seq_len: int
    n_samples: int
    seed: int
    precision: str
    params: int
    entropy_bits: float
    status: str
    steps_done: int
    steps_total: int
    seconds: float
    memorized_bits: float | None
    share_memorized: float | None = Field(description="memorized bits / dataset entropy")
    bits_per_param: float | None
    train_bits_per_token: float | None
    heldout_bits_per_token: float | None
    mia_f1: float | None
    mia_auc: float | None
    extraction_rate: float | None
    predicted_mia_f1: float = Field(description="the paper's scaling law for this cell's P and N")


class SeedCapacity(BaseModel):
    seed: int
    capacity_bits: float = Field(description="This seed's max memorized bits over N")
    at_n: int
    bits_per_param: float


class DatasetSizeMemorization(BaseModel):
    n_samples: int
    seeds: int = Field(description="Seeds with a finished cell at this N")
    mean_bits: float = Field(description="Memorized bits, mean over seeds")
    sd_bits: float | None = Field(description="Sample standard deviation over seeds (null with one seed)")


class ArchitectureCapacity(BaseModel):
    architecture: str
    precision: str
    params: int
    capacity_bits: float | None = Field(
        description="Capacity: max over N of the memorized bits averaged over seeds (cells done so far); this is"
        " what bits_per_param divides"
    )
    capacity_sd_bits: float | None = Field(
        default=None, description="Standard deviation over seeds of the memorized bits at at_n (null: one seed)"
    )
    at_n: int | None
    bits_per_param: float | None
    seeds: list[SeedCapacity] = Field(default_factory=list, description="Per seed: its own max over N")
    seed_capacity_mean_bits: float | None = Field(
        default=None, description="Mean over seeds of the per-seed capacities (each seed's max over N)"
    )
    seed_capacity_sd_bits: float | None = Field(
        default=None, description="Sample standard deviation of the per-seed capacities (null with one seed)"
    )
    by_n: list[DatasetSizeMemorization] = Field(default_factory=list)


class CapacityGridRead(BaseModel):
    audit_id: str
    status: str
    cells: list[CapacityCellRead]
    capacity: list[ArchitectureCapacity]


class SeriesPoint(BaseModel):
    n: int
    memorized_bits: float
    entropy_bits: float


class MemorizedSeries(BaseModel):
    architecture: str
    precision: str
    params: int
    seed: int
    points: list[SeriesPoint]
    capacity_bits: float


class BitsPerParamPoint(BaseModel):
    architecture: str
    precision: str
    params: int
    bits_per_param: float


class TrainingCurve(BaseModel):
    position: int
    label: str
    steps: list[int]
    seconds: list[float]
    bits_per_param: list[float]


class CapacitySeries(BaseModel):
    memorized_vs_n: list[MemorizedSeries] = Field(description="memorized bits against N, per architecture")
    bits_per_param: list[BitsPerParamPoint] = Field(description="capacity / parameters against parameters")
    training_curves: list[TrainingCurve]


class TextSampleRead(BaseModel):
    position: int
    text: str
    nll_model_bits: float | None
    nll_reference_bits: float | None
    memorized_bits: float | None
    rarity: float | None = Field(description="TF-IDF-weighted mean IDF of its words (higher = rarer)")


class TextResultsRead(BaseModel):
    audit_id: str
    status: str
    total_memorized_bits: float | None
    samples: list[TextSampleRead] = Field(description="most memorized first")


class Prediction(BaseModel):
    params: float
    samples: float
    x: float = Field(description="1000 · samples / params: the law's argument (see docs/capacity.md)")
    predicted_f1: float
    constants: dict[str, float]
