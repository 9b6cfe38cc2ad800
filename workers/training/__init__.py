"""Train small GPT-2-style models from scratch (capacity and dynamics audits).

from workers.training import GPTConfig, init_model, Trainer, TrainConfig, sequence_nll, uniform_tokens
"""

from workers.training.loop import (
    StepInfo,
    TrainConfig,
    Trainer,
    greedy_extracted,
    sequence_nll,
    uniform_tokens,
)
from workers.training.measure import measure_cell
from workers.training.model import GPTConfig, TinyGPT, count_parameters, init_model, paper_smallest

__all__ = [
    "GPTConfig",
    "StepInfo",
    "TinyGPT",
    "TrainConfig",
    "Trainer",
    "count_parameters",
    "greedy_extracted",
    "init_model",
    "measure_cell",
    "paper_smallest",
    "sequence_nll",
    "uniform_tokens",
]
