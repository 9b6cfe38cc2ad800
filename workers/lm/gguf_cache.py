"""A converted copy of each GGUF model, so that only the first load pays for de-quantization.

transformers reads a GGUF file by de-quantizing every tensor and converting its tokenizer (26-60 s for SmolLM2-135M on
a 2-core CPU); the same weights saved as safetensors load in well under a second. The first load of a GGUF model
stores the model as transformers de-quantized it (safetensors + config + tokenizer files) under
``settings.model_cache_dir``, in a directory named after the GGUF file's SHA-256, the precision and the transformers
version (another version may convert differently, so it converts again). Later loads read that copy.

The copy holds exactly the tensors of the first load, so the numbers are identical; the scorer's fingerprint is still
computed from the GGUF file (workers/lm/loading.py), so the NLL cache is shared between both kinds of load.
Writes go to a temporary directory renamed into place: a crash or a second process never leaves half a copy.
An empty ``MEMAUDIT_MODEL_CACHE_DIR`` turns the cache off.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from app.settings import Settings
from workers.lm.registry import ModelSource

log = logging.getLogger(__name__)
MARKER = "memaudit-gguf-cache.json"  # written last: a directory without it is not a usable copy


def entry_dir(settings: Settings, gguf_sha256: str, dtype: torch.dtype) -> Path | None:
    """Where the converted copy of this GGUF file at this precision lives (None: the cache is off)."""
    if not settings.model_cache_dir:
        return None
    import transformers

    precision = str(dtype).removeprefix("torch.")
    return Path(settings.model_cache_dir).expanduser() / f"gguf-{gguf_sha256}-{precision}-tf{transformers.__version__}"


def cached_source(entry: Path | None, gguf_sha256: str) -> ModelSource | None:
    """The converted copy as a plain model directory, if a complete one exists."""
    if entry is None:
        return None
    try:
        marker = json.loads((entry / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if marker.get("gguf_sha256") != gguf_sha256:
        return None
    return ModelSource(location=str(entry), directory=entry)


def store(entry: Path | None, gguf_sha256: str, model: Any, tokenizer: Any) -> bool:
    """Save the de-quantized model and its tokenizer as ``entry``; False (and a warning) when it cannot."""
    if entry is None or entry.exists():
        return False
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=entry.parent))
    except OSError as exc:
        log.warning(
            "cannot create the model cache directory %s (%s); GGUF models will be converted at each load",
            entry.parent,
            exc.strerror or type(exc).__name__,
        )
        return False
    try:
        _save(model, tokenizer, tmp)
        (tmp / MARKER).write_text(json.dumps({"gguf_sha256": gguf_sha256, "dtype": str(model.dtype)}))
        os.rename(tmp, entry)  # atomic; fails if another process stored it first, which is as good
        return True
    except OSError as exc:
        log.warning("could not store the converted model in %s (%s)", entry.parent, exc.strerror or exc)
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _save(model: Any, tokenizer: Any, directory: Path) -> None:
    # transformers refuses to save a model loaded from GGUF ("quantized with gguf, not serializable"), yet after
    # loading its tensors are ordinary de-quantized ones: save them as a plain model, then restore the attributes.
    quantizer = getattr(model, "hf_quantizer", None)
    config = model.config
    had_qc = hasattr(config, "quantization_config")
    quantization_config = getattr(config, "quantization_config", None)
    try:
        model.hf_quantizer = None
        if had_qc:
            del config.quantization_config
        model.save_pretrained(directory, safe_serialization=True)
    finally:
        model.hf_quantizer = quantizer
        if had_qc:
            config.quantization_config = quantization_config
    tokenizer.save_pretrained(directory)
