"""Loading models by name: clear errors, a process-wide cache, fingerprints that follow weights and tokenizer."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.settings import REPO_ROOT, ModelSpec, Settings
from workers.lm import ModelLoadError, get_scorer, load_scorer
from workers.lm.registry import resolve_spec


def settings_with(**models: ModelSpec) -> Settings:
    return Settings(models=models)


def test_importing_workers_lm_does_not_import_torch_or_vllm() -> None:
    code = "import sys, workers.lm; print(sorted(m for m in ('torch', 'vllm', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"workers.lm pulled in heavy modules: {out.stdout}"


@pytest.mark.parametrize(
    ("name", "models", "message"),
    [
        ("gpt-99", {}, "unknown model"),
        ("hf:", {}, "must be followed by"),
        ("hf:/nonexistent/memaudit/model", {}, "does not exist"),
        ("hf:memaudit-tests/definitely-not-cached", {}, "local Hugging Face cache"),
        (
            "ghost",
            {"ghost": ModelSpec(package="memaudit_no_such_package", gguf_file="m.gguf")},
            "package memaudit_no_such_package not installed",
        ),
        ("empty", {"empty": ModelSpec()}, "neither a path nor a package"),
    ],
)
def test_loading_errors_name_the_model_and_what_is_missing(name: str, models: dict, message: str) -> None:
    with pytest.raises(ModelLoadError, match=message) as caught:
        load_scorer(name, settings_with(**models))
    if name in models:  # a registered entry is the operator's, not user input: the message names it
        assert repr(name) in str(caught.value) or name in str(caught.value)


def test_missing_gguf_file_is_named(tiny_dir: Path) -> None:
    with pytest.raises(ModelLoadError, match="GGUF file missing.gguf not found"):
        load_scorer("g", settings_with(g=ModelSpec(path=str(tiny_dir), gguf_file="missing.gguf")))


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_backend_without_vllm_says_so(tiny_dir: Path) -> None:
    with pytest.raises(ModelLoadError, match="vllm"):
        load_scorer("v", settings_with(v=ModelSpec(backend="vllm", path=str(tiny_dir))))


def test_get_scorer_keeps_one_loaded_model_per_name(tiny_dir: Path) -> None:
    name = f"hf:{tiny_dir}"
    first = get_scorer(name)
    assert get_scorer(name) is first, "the worker would reload the model for every job"


def test_fingerprint_follows_weights_tokenizer_and_precision(tiny_dir: Path, make_tiny_model, tmp_path: Path) -> None:
    base = load_scorer(f"hf:{tiny_dir}")
    copy = tmp_path / "copy"
    shutil.copytree(tiny_dir, copy)
    assert load_scorer(f"hf:{copy}").fingerprint == base.fingerprint, "same files, different fingerprint"

    other_weights = make_tiny_model(tmp_path / "seed1", seed=1)
    assert load_scorer(f"hf:{other_weights}").fingerprint != base.fingerprint

    tokenizer_config = copy / "tokenizer_config.json"
    tokenizer_config.write_text(tokenizer_config.read_text().replace('"<pad>"', '"</s>"', 1))
    assert load_scorer(f"hf:{copy}").fingerprint != base.fingerprint, "a tokenizer change kept the fingerprint"

    bf16 = load_scorer("b", settings_with(b=ModelSpec(path=str(tiny_dir), dtype="bfloat16")))
    assert bf16.fingerprint != base.fingerprint, "bf16 NLLs differ from fp32: they must not share cache entries"


def test_the_worker_resolves_exactly_what_the_api_accepts() -> None:
    settings = Settings()
    for name in ("hf:", "hf: ", "gpt-99"):
        with pytest.raises(ModelLoadError):
            resolve_spec(name, settings)
    assert resolve_spec("hf: /some/dir", settings).path == "/some/dir"
    assert resolve_spec("groundtruth-tiny", settings) == settings.models["groundtruth-tiny"]
