"""Request and response shapes of training-dynamics audits (Ghosh et al., 2025)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.validation import RequestModel
from core.measures.dynamics import DEFAULT_MARGIN, DEFAULT_TAU
from core.models import MODEL_HELP

MAX_STRINGS = 5000
MAX_TEXT_CHARS = 4000
MAX_TRAJECTORY_CHARS = 20_000_000
MAX_CONTEXT = 1024


class StringIn(RequestModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(default=None, min_length=1, max_length=200, description="Your id; default s<position>")
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    count: int = Field(default=1, ge=1, le=100_000, description="How often the string occurs in the training set")


class PCFGIn(RequestModel):
    """A generated hierarchical PCFG language (see docs/dynamics.md) and how many strings to draw from it."""

    model_config = ConfigDict(extra="forbid")

    depth: int = Field(default=3, ge=1, le=8)
    branching_min: int = Field(default=2, ge=1, le=8)
    branching_max: int = Field(default=2, ge=1, le=8)
    rules_per_symbol: int = Field(default=3, ge=1, le=16)
    symbols_per_level: int = Field(default=3, ge=1, le=32)
    vocab_size: int = Field(default=8, ge=1, le=4096)
    rule_entropy: float = Field(default=1.0, gt=0.0, le=1.0, description="Share of the maximum rule entropy")
    rules_per_level: list[int] | None = Field(default=None, description="Alternatives per level 0..depth")
    branching_per_level: list[int] | None = Field(default=None, description="Fixed widths per level 0..depth-1")
    seed: int = Field(default=0, ge=0)
    samples: int = Field(default=300, ge=1, le=100_000, description="Strings drawn (with repeats) as the training set")


class TrajectoryFileIn(RequestModel):
    """Your own per-string losses per epoch; the schema is in docs/dynamics.md (one row per string and epoch)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["jsonl", "csv"]
    content: str = Field(min_length=1, max_length=MAX_TRAJECTORY_CHARS)


class DynamicsOptions(RequestModel):
    model_config = ConfigDict(extra="forbid")

    recipe: Literal["scratch", "finetune"] = Field(
        default="scratch",
        description="scratch: a tiny GPT trained from scratch; finetune: the registered `model` fine-tuned (small "
        "models only). Ignored for imported trajectories.",
    )
    folds: int = Field(default=4, ge=2, le=20, description="K: runs, each holding one fold of the strings out")
    epochs: int = Field(default=10, ge=1, le=500, description="E: epochs per run; cost is K x E passes")
    tau: float = Field(default=DEFAULT_TAU, gt=0.0, description="Recollection threshold, nats/token")
    margin: float = Field(default=DEFAULT_MARGIN, ge=0.0, description="Counterfactual margin, nats/token")
    tokenizer: Literal["auto", "bytes", "words"] = Field(
        default="auto",
        description="scratch recipe: auto = words for PCFG strings, bytes for yours (finetune always "
        "uses the model's own tokenizer)",
    )
    d_model: int = Field(default=64, ge=8, le=1024)
    n_layer: int = Field(default=2, ge=1, le=24)
    n_head: int = Field(default=4, ge=1, le=32)
    batch_size: int = Field(default=16, ge=1, le=1024)
    lr: float | None = Field(default=None, gt=0.0, le=1.0, description="Default 3e-3 (scratch), 1e-4 (finetune)")
    context: int = Field(default=128, ge=4, le=MAX_CONTEXT, description="Tokens per string, BOS and EOS included")
    seed: int = Field(default=0, ge=0)

    def resolved_tokenizer(self, *, generated: bool) -> str:
        """What tokenizes the strings: the model's own (finetune), else the option, with auto = words for PCFG
        strings and bytes for the caller's."""
        if self.recipe == "finetune":
            return "model"
        if self.tokenizer != "auto":
            return self.tokenizer
        return "words" if generated else "bytes"

    @property
    def learning_rate(self) -> float:
        if self.lr is not None:
            return self.lr
        return 1e-4 if self.recipe == "finetune" else 3e-3

    @model_validator(mode="after")
    def _heads_divide_width(self) -> DynamicsOptions:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")
        return self


class DynamicsAuditCreate(RequestModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["dynamics"]
    model: str = Field(
        min_length=1,
        max_length=300,
        description=f"The model: {MODEL_HELP}. finetune: the model to fine-tune. scratch and imported "
        "trajectories: the model the audit is about (recorded, not loaded unless tokenizer=model)",
    )
    strings: list[StringIn] | None = Field(default=None, max_length=MAX_STRINGS, description="Your strings")
    pcfg: PCFGIn | None = Field(default=None, description="Or: strings drawn from a generated PCFG language")
    trajectories: TrajectoryFileIn | None = Field(default=None, description="Or: your own trajectories (no training)")
    options: DynamicsOptions = Field(default_factory=DynamicsOptions)

    @model_validator(mode="after")
    def _one_source(self) -> DynamicsAuditCreate:
        given = [name for name in ("strings", "pcfg", "trajectories") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of strings, pcfg, trajectories (got {', '.join(given) or 'none'})")
        return self


class StringSeries(BaseModel):
    string_id: str
    train_loss: list[float]
    heldout_loss: list[float]
    counterfactual_score: list[float] = Field(description="held-out minus train loss per epoch")
    recollection_threshold: float
    contextual_threshold: float
    counterfactual_margin: float


class DynamicsSeries(BaseModel):
    """Plot-ready: share memorized per epoch for each measure, mean losses, and selected strings' curves with the
    three thresholds."""

    epochs: list[int]
    share: dict[str, list[float]]
    share_weighted: dict[str, list[float]] | None
    mean_train_loss: list[float]
    mean_heldout_loss: list[float]
    best_heldout_epoch: int
    strings: list[StringSeries]
