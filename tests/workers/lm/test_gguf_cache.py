"""A GGUF model is converted once: the second load reads the stored copy, with the same fingerprint and NLLs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from app.settings import Settings
from workers.lm.gguf_cache import MARKER, entry_dir
from workers.lm.hf import HFScorer
from workers.lm.loading import load_model
from workers.lm.registry import resolve_source, resolve_spec

PAIRS = [
    ("Albert Einstein's occupation is", " physicist."),
    ("Marie Curie was born in", " Warsaw."),
    ("", "Water boils at one hundred degrees."),
]


@pytest.mark.slow
def test_second_load_reads_the_converted_copy(tmp_path: Path) -> None:
    settings = Settings(model_cache_dir=str(tmp_path / "models"))
    spec = resolve_spec("smollm2-135m", settings)
    source = resolve_source("smollm2-135m", spec)

    first = load_model("smollm2-135m", spec, source, settings)
    assert first.origin.startswith("converted the GGUF file (copy stored in"), first.origin
    [entry] = (tmp_path / "models").iterdir()
    assert (entry / "model.safetensors").is_file() and json.loads((entry / MARKER).read_text())["gguf_sha256"]
    first_nll = HFScorer("smollm2-135m", first, settings.score_batch_tokens).score(PAIRS)

    second = load_model("smollm2-135m", spec, source, settings)
    assert second.origin == f"read the converted copy {entry}"
    scorer = HFScorer("smollm2-135m", second, settings.score_batch_tokens)
    assert scorer.score(PAIRS) == first_nll, "the copy must hold exactly the de-quantized tensors"
    # `first` was converted from the GGUF file as an uncached load is (a third conversion cost 15-20 CPU-s)
    assert second.fingerprint == first.fingerprint, "the NLL cache is keyed by it: a copy must not change it"
    assert second.document_start_id == first.document_start_id and second.max_length == first.max_length
    sha = json.loads((entry / MARKER).read_text())["gguf_sha256"]
    assert entry_dir(Settings(model_cache_dir=""), sha, torch.float32) is None  # an empty directory: no cache
