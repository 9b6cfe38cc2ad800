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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from workers.lm.base import ModelLoadError, ProgressCallback, ScoringError

__all__ = [
    "GENERATORS",
    "BudgetExhausted",
    "Generator",
    "Prompt",
    "Sample",
    "Usage",
    "budget",
    "get_generator",
]


class BudgetExhausted(ScoringError):
    """The audit's query budget (``budget``) is spent: the request that would exceed it is not sent. A ScoringError,
    so a job reports it as a readable failure; the message names the budget, never a prompt."""


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
    _budgets: list[tuple[int, str]] = field(default_factory=list, repr=False, compare=False)  # (query limit, why)

    def add(self, **counts: int) -> None:
        """Add to the totals; raises BudgetExhausted (adding nothing) when ``queries`` would pass a budget's
        limit. A generator adds a query before sending it, so a spent budget stops the request."""
        with self._lock:
            queries = self.queries + counts.get("queries", 0)
            for limit, message in self._budgets:
                if counts.get("queries", 0) and queries > limit:
                    raise BudgetExhausted(message)
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


@contextmanager
def budget(generator: Generator, max_queries: int | None, *, fix: str | None = None) -> Iterator[Usage]:
    """Within the block, ``generator.sample`` raises BudgetExhausted once it would send more than ``max_queries``
    requests (retries included) counted from entry; None: no limit. Thread-safe; budgets nest (each holds). Yields
    the generator's Usage. The generator is shared by the worker's jobs: run one budgeted audit at a time on it.
    ``fix``: how the user raises the budget (default: the model's ``max_queries_per_audit`` setting)."""
    usage = generator.usage
    if max_queries is None:
        yield usage
        return
    fix = fix or f"raise the model's max_queries_per_audit (MEMAUDIT_MODELS__{generator.name}__MAX_QUERIES_PER_AUDIT)"
    message = (
        f"model {generator.name!r}: the audit's query budget of {max_queries} request(s) is spent; {fix} or audit "
        "fewer facts"
    )
    with usage._lock:
        entry = (usage.queries + max_queries, message)
        usage._budgets.append(entry)
    try:
        yield usage
    finally:
        with usage._lock:
            usage._budgets.remove(entry)


# backend -> "module:function(name, spec, settings) -> Generator"; the module is imported only when needed
GENERATORS: dict[str, str] = {
    "hf": "workers.lm.hf_generation:load_generator",
    "knowledge-free": "workers.lm.knowledge_free_generation:load_generator",
    "openai": "workers.lm.chat:load_generator",  # /v1/completions without echo
    "openai-chat": "workers.lm.chat:load_generator",  # /v1/chat/completions
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
