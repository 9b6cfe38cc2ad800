"""The Scorer interface every language-model backend implements, and the errors it raises.

This module must stay free of torch and vLLM: the API process imports it (for types and errors) and never loads a
model. Error messages carry indexes and counts only, never the sentence text (it may hold personal data).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # types only: the registry imports this module
    from app.settings import ModelSpec, Settings
    from workers.lm.registry import ModelSource

# Called by a scorer while it works with the number of input sentences finished so far (never more than the input
# count; the last call, if any, is the input count). It may raise to abort (a cancelled audit does).
ProgressCallback = Callable[[int], None]


class ModelLoadError(Exception):
    """A model that cannot be loaded; the message names the model and what is missing."""


class ScoringError(ValueError):
    """A sentence the scorer refuses to score; the caller can act on the index it names."""


class EmptySentence(ScoringError):
    def __init__(self, index: int) -> None:
        self.index = index
        super().__init__(f"sentence #{index} is empty (prefix + continuation has no text to score)")


class SentenceTooLong(ScoringError):
    def __init__(self, index: int, n_tokens: int, max_length: int) -> None:
        self.index = index
        self.n_tokens = n_tokens
        self.max_length = max_length
        super().__init__(
            f"sentence #{index} is {n_tokens} tokens long (document-start token included); "
            f"the model's context is {max_length} tokens: shorten the template or the value"
        )


class ServerUnavailable(ScoringError):
    """A served model's server did not answer, or refused a request, after the backend's retries. A ScoringError so
    that every job reports it as a readable failure; sentences scored before it stay in the NLL cache. ``status``:
    what failed last (``HTTP 503``, ``ConnectError``, ...)."""

    def __init__(self, message: str, status: str = "") -> None:
        self.status = status
        super().__init__(message)


# Probe pairs for the load-time checks (the HF engine's self-check, the served backend's exactness check): shared
# prefixes, a multi-token tail, an empty prefix, a BPE merge across the boundary. Fixed text, no personal data.
PROBE_PAIRS: tuple[tuple[str, str], ...] = (
    ("The capital of France is", " Paris."),
    ("The capital of France is", " a large and old city."),
    ("", "Water boils at one hundred degrees."),
    ("The capital of Fra", "nce is Paris."),
)


# Held while a model, tokenizer or embedding model is loaded (workers.lm.registry.get_scorer, workers.embeddings):
# transformers imports its modules on first use, and two threads of one process importing them at once can see a
# partially initialised module ("cannot import name 'GenericForQuestionAnswering' from transformers.modeling_layers",
# seen when an embedded runner's job embedded values while another thread loaded groundtruth-tiny). Taken last,
# after any lock of the caller's, and never held while taking another: no lock-order cycle.
LOAD_LOCK = threading.RLock()


@runtime_checkable
class Scorer(Protocol):
    """A loaded causal language model that scores and completes text.

    ``name``: the registry name (e.g. ``"smollm2-135m"``).
    ``fingerprint``: hex digest that changes whenever the weights, the tokenizer or the numeric precision change;
    the NLL cache is keyed by it.
    ``document_start``: the token text prepended before every sentence (the model's BOS, or its documented
    document-start token such as ``<|endoftext|>``).
    ``max_length``: context length in tokens (document-start token included).
    A backend whose NLL costs less than a cache look-up may set ``caches_nlls = False`` (the jobs then score every
    sentence and store none; workers.jobs.scoring.score_all): the knowledge-free scorer does.
    """

    name: str
    fingerprint: str
    document_start: str
    max_length: int

    def score(self, pairs: Sequence[tuple[str, str]], *, on_progress: ProgressCallback | None = None) -> list[float]:
        """Summed NLL in nats of EVERY token of prefix+continuation (first token included, predicted from
        document_start). The sentence is prefix + continuation (plain string concatenation); the split only lets
        the backend share work between sentences with the same prefix, it never changes the value.
        Raises SentenceTooLong(index, n_tokens, max_length) / EmptySentence(index). ``on_progress`` (optional) is
        called from inside the work with the number of sentences finished so far, at sub-batch granularity."""
        ...

    def generate(self, prompts: Sequence[str], max_new_tokens: int, stop: str = "\n") -> list[str]:
        """Greedy decoding (no sampling); returns the continuation text up to (excluding) ``stop``."""
        ...

    @classmethod
    def load(cls, name: str, spec: ModelSpec, source: ModelSource | None, settings: Settings) -> Scorer:
        """The factory every backend declares: the registry (workers/lm/registry.py) imports the backend class
        named in BACKENDS lazily and calls this. ``source``: where the weights are (None for a served model)."""
        ...


def check_not_empty(pairs: Sequence[tuple[str, str]]) -> None:
    """Raise EmptySentence for the first sentence that is empty or whitespace only (it has no meaning to score)."""
    for index, (prefix, continuation) in enumerate(pairs):
        if not (prefix + continuation).strip():
            raise EmptySentence(index)


def plain_ids(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text without special tokens: ``tokenizer(texts, add_special_tokens=False)["input_ids"]``.
    A fast tokenizer whose Rust backend holds no truncation or padding and parses special tokens as the wrapper
    would is asked directly: the same ids without the wrapper's per-text Python (its ``_convert_encoding`` was a third
    of tokenizing a null's sentences; docs/lab/2026-11-29-engine-overheads.md)."""
    if not texts:
        return []
    backend = getattr(tokenizer, "_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if (
        backend is not None
        and backend.truncation is None
        and backend.padding is None
        and backend.encode_special_tokens == bool(getattr(tokenizer, "split_special_tokens", False))
    ):
        return [encoding.ids for encoding in backend.encode_batch(list(texts), add_special_tokens=False)]
    return [list(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]
