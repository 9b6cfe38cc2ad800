"""Model names, parsed once: a registered name, or ``hf:<local path or hub id>`` for any model transformers loads.

The API checks a submitted name with :func:`parse_model_name` (a 422 naming the field), and the worker resolves it
with the same function, so a name the API accepts is never one the job rejects by name."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

HF_PREFIX = "hf:"
MODEL_HELP = "a registered model name (GET /models) or 'hf:<local path or hub id>'"


class ModelNameError(ValueError):
    """A model name that names no model; the message says what to use instead."""


@dataclass(frozen=True)
class ModelName:
    name: str  # as given
    hf_target: str | None = None  # the local path or hub id after ``hf:``; None for a registered name

    @property
    def registered(self) -> bool:
        return self.hf_target is None


def parse_model_name(name: str, registered: Collection[str]) -> ModelName:
    """``hf:<target>`` (target not blank) or one of ``registered``; else ModelNameError."""
    if name.startswith(HF_PREFIX):
        target = name[len(HF_PREFIX) :].strip()
        if not target:
            raise ModelNameError(f"model {name!r}: 'hf:' must be followed by a local path or a hub id")
        return ModelName(name, target)
    if name not in registered:
        known = ", ".join(sorted(registered)) or "none"
        hint = f"use one of {known} (GET /models) or 'hf:<local path or hub id>'"
        raise ModelNameError(f"model {name!r} is not registered: {hint}")
    return ModelName(name)
