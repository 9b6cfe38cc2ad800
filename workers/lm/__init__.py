"""Language-model backends behind one small interface (workers.lm.base.Scorer).

Importing this package never imports torch or vLLM: backends are registered by dotted path in
workers.lm.registry and imported when a model of that backend is first loaded.
"""

from workers.lm.base import EmptySentence, ModelLoadError, Scorer, ScoringError, SentenceTooLong
from workers.lm.registry import get_scorer, load_scorer

__all__ = [
    "EmptySentence",
    "ModelLoadError",
    "Scorer",
    "ScoringError",
    "SentenceTooLong",
    "get_scorer",
    "load_scorer",
]
