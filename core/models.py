"""Model names, parsed once: a registered name, or ``hf:<local path or hub id>`` for any model transformers loads,
either followed by ``+adapter:<directory>`` for a PEFT (LoRA) adapter applied on top of it (a user's fine-tune).

The API checks a submitted name with :func:`parse_model_name` (a 422 naming the field), and the worker resolves it
with the same function, so a name the API accepts is never one the job rejects by name."""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

HF_PREFIX = "hf:"
ADAPTER_MARK = "+adapter:"
MODEL_HELP = (
    "a registered model name (GET /models) or 'hf:<local path or hub id>', either followed by"
    " '+adapter:<directory>' for a PEFT (LoRA) adapter on it"
)


class ModelNameError(ValueError):
    """A model name that names no model; the message says what to use instead."""


@dataclass(frozen=True)
class ModelName:
    name: str  # as given
    hf_target: str | None = None  # the local path or hub id after ``hf:``; None for a registered name
    adapter: str | None = None  # the adapter directory after ``+adapter:``

    @property
    def base(self) -> str:
        """The name without its adapter (the name itself when there is none)."""
        return self.name.rpartition(ADAPTER_MARK)[0] if self.adapter is not None else self.name

    @property
    def registered(self) -> bool:
        return self.hf_target is None


def with_adapter(model: str, adapter: str | None) -> str:
    """The model name that audits ``adapter`` on ``model`` (``model`` itself without one)."""
    return f"{model}{ADAPTER_MARK}{adapter}" if adapter else model


def hf_path_under(target: str, roots: Sequence[Path]) -> bool:
    """An absolute path that stays under a root once `..` and `.` are resolved (lexically: the worker also
    resolves links on its own disk before loading)."""
    if not os.path.isabs(target) or "\x00" in target:
        return False
    path = os.path.normpath(target)
    return any(path == str(root) or path.startswith(str(root).rstrip(os.sep) + os.sep) for root in roots)


def parse_model_name(name: str, registered: Collection[str], hf_roots: Sequence[Path] | None = None) -> ModelName:
    """``hf:<target>`` (target not blank, and under one of ``hf_roots`` unless they are None: anywhere; an empty
    list allows no ``hf:`` model) or one of ``registered``, either with ``+adapter:<directory>`` (an absolute path
    under ``hf_roots`` by the same rule; once); else ModelNameError. Messages never repeat the name (it is user
    input) and say the same whether a path exists or not."""
    if ADAPTER_MARK in name:
        base, _, adapter = name.rpartition(ADAPTER_MARK)
        adapter = adapter.strip()
        if not adapter or ADAPTER_MARK in base:
            raise ModelNameError("'+adapter:' must be followed by an adapter directory, once")
        if hf_roots is not None and not hf_path_under(adapter, hf_roots):
            raise ModelNameError(
                "adapters are accepted only as absolute paths under the server's model roots (MEMAUDIT_MODEL_ROOTS)"
            )
        parsed = parse_model_name(base, registered, hf_roots)
        return ModelName(name, parsed.hf_target, adapter)
    known = ", ".join(sorted(registered)) or "none"
    if name.startswith(HF_PREFIX):
        target = name[len(HF_PREFIX) :].strip()
        if not target:
            raise ModelNameError("'hf:' must be followed by a local path or a hub id")
        if hf_roots is not None and not hf_path_under(target, hf_roots):
            where = "on this server (no model roots)"
            if hf_roots:
                where = "under the server's model roots (MEMAUDIT_MODEL_ROOTS)"
            raise ModelNameError(f"hf: models are accepted only {where}; use one of {known} (GET /models)")
        return ModelName(name, target)
    if name not in registered:
        hf = "" if hf_roots == [] else " or 'hf:<local path or hub id>'"
        raise ModelNameError(f"unknown model: use one of {known} (GET /models){hf}")
    return ModelName(name)
