"""The negative control of mode generation: a "model" that answers without knowing anyone. Each answer is drawn by
a seeded hash of (the model's seed, the call's seed, the prompt, the sample's index) from one vocabulary — every pool
value of every catalog property, and a few refusals and garbage — that does not depend on who a prompt names, so
every true value it gives is chance. Audits on it measure a generation configuration's false-positive rate in
seconds (docs/measures.md, "Generation mode")."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence

from app.settings import ModelSpec, Settings
from core.catalog import load_catalog
from workers.lm.base import ProgressCallback
from workers.lm.generation import Prompt, Sample, Usage

VERSION = "knowledge-free-generation-1"  # bump when the answer function changes (it is the fingerprint's root)
FREE_TEXT = ("I don't know.", "I'm not sure.", "Unknown.", "no information", "the", "...", "a person", "yes")


@functools.cache
def answer_vocabulary() -> tuple[str, ...]:
    """Every pool value of every catalog property (in catalog order), then the free text."""
    values = [v for prop in load_catalog() for v in prop.pool]
    return tuple(dict.fromkeys([*values, *FREE_TEXT]))


class KnowledgeFreeGenerator:
    """A Generator whose answers carry no knowledge (see the module docstring)."""

    seeded = True

    def __init__(self, name: str, seed: str) -> None:
        self.name = name
        self.seed = seed
        self.fingerprint = hashlib.sha256(f"{VERSION}:{seed}".encode()).hexdigest()
        self.usage = Usage()

    def answer(self, prompt: Prompt, seed: int, index: int) -> str:
        asked = "\x01".join(m.get("content", "") for m in prompt.messages) if prompt.messages else prompt.text or ""
        digest = hashlib.sha256(f"{self.seed}\x00{seed}\x00{asked}\x00{index}".encode()).digest()
        vocabulary = answer_vocabulary()
        return " " + vocabulary[int.from_bytes(digest[:8], "big") % len(vocabulary)] + "."

    def sample(
        self,
        prompts: Sequence[Prompt],
        n: int,
        *,
        temperature: float,
        max_tokens: int,
        seed: int,
        top_logprobs: int = 0,
        on_progress: ProgressCallback | None = None,
    ) -> list[list[Sample]]:
        out = [[Sample(self.answer(p, seed, i)) for i in range(n)] for p in prompts]
        words = sum(len(s.text.split()) for row in out for s in row)
        self.usage.add(queries=len(prompts), prompts=len(prompts), samples=n * len(prompts), completion_tokens=words)
        if on_progress is not None:
            on_progress(len(prompts))
        return out


def load_generator(name: str, spec: ModelSpec, settings: Settings) -> KnowledgeFreeGenerator:
    return KnowledgeFreeGenerator(name, spec.path or "0")


__all__ = ["KnowledgeFreeGenerator", "answer_vocabulary", "load_generator"]
