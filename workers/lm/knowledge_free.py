"""The negative control: a "model" that knows nothing. Its NLL of a sentence is drawn from a seeded hash of the
sentence's text (no weights, no tokenizer): independent of who the sentence is about, so every fact it "retrieves"
is chance. Audits on it measure a configuration's false-positive rate on any roster, in seconds — a fact flagged
on `knowledge-free` is flagged by the method, not by a model (docs/measures.md, "Negative control").

The NLL is 4 nats per word plus a uniform draw of ±8 nats keyed by (seed, sentence): roughly the scale of a small
LM's sentence NLLs, and the same sentence always scores the same. Not cached (``caches_nlls``): a hash costs less
than a cache look-up, and storing it cost its audits ~13 % of their time (the knowledge-free e2e, py-spy).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from app.settings import ModelSpec, Settings
from workers.lm.base import ProgressCallback, check_not_empty

VERSION = "knowledge-free-1"  # bump when the NLL function changes (it is the fingerprint's root)
NATS_PER_WORD = 4.0
SPREAD = 8.0
MAX_LENGTH = 4096  # "tokens": words here


class KnowledgeFreeScorer:
    """A Scorer whose NLLs carry no knowledge (see the module docstring)."""

    document_start = ""
    max_length = MAX_LENGTH
    caches_nlls = False  # workers.jobs.scoring.score_all scores every sentence again: cheaper than the cache

    def __init__(self, name: str, seed: str) -> None:
        self.name = name
        self.seed = seed
        self.fingerprint = hashlib.sha256(f"{VERSION}:{seed}".encode()).hexdigest()

    @classmethod
    def load(cls, name: str, spec: ModelSpec, source: object, settings: Settings) -> KnowledgeFreeScorer:
        return cls(name, spec.path or "0")

    def nll(self, sentence: str) -> float:
        digest = hashlib.sha256(f"{self.seed}\x00{sentence}".encode()).digest()
        uniform = int.from_bytes(digest[:8], "big") / 2**64
        return NATS_PER_WORD * max(1, len(sentence.split())) + SPREAD * (2.0 * uniform - 1.0)

    def score(self, pairs: Sequence[tuple[str, str]], *, on_progress: ProgressCallback | None = None) -> list[float]:
        check_not_empty(pairs)
        out = [self.nll(prefix + continuation) for prefix, continuation in pairs]
        if on_progress is not None:
            on_progress(len(out))
        return out

    def generate(self, prompts: Sequence[str], max_new_tokens: int, stop: str = "\n") -> list[str]:
        """Knows no continuation: an empty completion for every prompt (a coverage audit reproduces nothing)."""
        return ["" for _ in prompts]


__all__ = ["KnowledgeFreeScorer"]
