"""vLLM backend: runs only where vLLM and CUDA exist (GPU workers). It has NOT been exercised on the development
machines (no GPU, vLLM not installable); see docs/engine.md."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HAS_VLLM = importlib.util.find_spec("vllm") is not None

pytestmark = pytest.mark.gpu


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


needs_gpu = pytest.mark.skipif(not (HAS_VLLM and _cuda()), reason="needs vLLM and a CUDA GPU")


@needs_gpu
def test_vllm_scores_match_the_hf_backend(tiny_dir: Path, tiny) -> None:
    from app.settings import ModelSpec, Settings
    from workers.lm import load_scorer

    scorer = load_scorer("v", Settings(models={"v": ModelSpec(backend="vllm", path=str(tiny_dir))}))
    pairs = [("Barack Obama's occupation is", " lawyer."), ("", "Water boils at one hundred degrees.")]
    got, want = scorer.score(pairs), tiny.score(pairs)
    # GPU kernels (TF32 matmuls, other reduction orders) differ from the CPU reference more than fp32 on one device
    assert max(abs(a - b) for a, b in zip(got, want, strict=True)) <= 1e-2, (got, want)
    assert scorer.document_start == tiny.document_start


@needs_gpu
def test_vllm_generate_is_greedy(tiny_dir: Path, tiny) -> None:
    from app.settings import ModelSpec, Settings
    from workers.lm import load_scorer

    scorer = load_scorer("v", Settings(models={"v": ModelSpec(backend="vllm", path=str(tiny_dir))}))
    prompts = ["Barack Obama's occupation is", "Water"]
    assert scorer.generate(prompts, 8, stop="") == tiny.generate(prompts, 8, stop="")
