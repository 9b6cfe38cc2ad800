"""The second way to probe a model, beside scoring: ask it and read what it says (issue 41, "generation" mode).

A ``Generator`` turns prompts into ``n`` sampled answers each. It needs no prompt log-probabilities, so it works for
chat-only endpoints (OpenAI-compatible ``/v1/chat/completions``) as well as for local models; where the backend gives
the generated tokens' ``top_logprobs`` they come with each answer.

Backends implement it in their own modules, imported lazily (this module stays free of torch, like ``base``):
``hf`` in ``workers.lm.hf_generation``, ``knowledge-free`` in ``workers.lm.knowledge_free_generation``, served chat
and completions endpoints in ``workers.lm.chat``. ``get_generator`` is the jobs' entry point.

Messages never carry the prompts or the answers (they hold names and facts): indexes and counts only.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from workers.lm.base import ModelLoadError, ProgressCallback

__all__ = ["GENERATORS", "Generator", "Prompt", "Sample", "Usage", "get_generator"]


@dataclass(frozen=True)
class Prompt:
    """One question. ``messages``: the chat form (``[{"role": "user", "content": ...}]``), for chat endpoints and
    chat templates; ``text``: the completion form (a prefix to continue), for completion endpoints and base models.
    A generator uses the form it can, preferring the one the caller's options ask for; at least one is set."""

    messages: tuple[dict[str, str], ...] = ()
    text: str | None = None


@dataclass(frozen=True)
class Sample:
    """One sampled answer: its text (up to the stop, stripped of nothing) and, where the backend gives them, the
    ``top_logprobs`` of each generated token (token text -> log-probability, most likely first)."""

    text: str
    top_logprobs: tuple[dict[str, float], ...] | None = None


@dataclass
class Usage:
    """What the generator has cost so far: requests sent (a retried request counts each time), prompts answered,
    samples returned and tokens generated (the prompt tokens where the backend reports them)."""

    queries: int = 0
    prompts: int = 0
    samples: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("queries", "prompts", "samples", "completion_tokens", "prompt_tokens")}


@runtime_checkable
class Generator(Protocol):
    """A model that answers. ``name``: the registry name; ``fingerprint``: changes when the weights (or, for a served
    model, the endpoint and served model) change; ``usage``: running totals; ``seeded``: whether ``seed`` makes the
    answers reproducible (a local model: yes; an endpoint: only if it honours the seed)."""

    name: str
    fingerprint: str
    usage: Usage
    seeded: bool

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
        """``n`` answers per prompt, in prompt order. ``temperature`` 0 is greedy (then the n answers are equal).
        Raises ServerUnavailable (served) or ScoringError naming the prompt's index, never its text."""
        ...


# backend -> "module:function(name, spec, settings) -> Generator"; the module is imported only when needed
GENERATORS: dict[str, str] = {
    "hf": "workers.lm.hf_generation:load_generator",
    "knowledge-free": "workers.lm.knowledge_free_generation:load_generator",
    "openai": "workers.lm.chat:load_generator",
}
_LOADED: dict[str, Generator] = {}
_LOCK = threading.Lock()


def get_generator(name: str) -> Generator:
    """The generator for a registry name (or ``hf:<path>``), cached per process like scorers. Raises ModelLoadError
    naming the model when its backend cannot generate."""
    from app.settings import get_settings
    from workers.lm.registry import resolve_spec

    with _LOCK:
        if name in _LOADED:
            return _LOADED[name]
        settings = get_settings()
        spec = resolve_spec(name, settings)
        dotted = GENERATORS.get(spec.backend)
        if dotted is None:
            raise ModelLoadError(f"model {name!r}: backend {spec.backend!r} cannot answer questions (mode generation)")
        module_name, _, attr = dotted.partition(":")
        try:
            load = getattr(importlib.import_module(module_name), attr)
        except ImportError as exc:
            raise ModelLoadError(f"model {name!r}: generation needs {exc.name or exc}, not installed") from exc
        generator = load(name, spec, settings)
        _LOADED[name] = generator
        return generator
