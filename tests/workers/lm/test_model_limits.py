"""hf: models on a worker: only under the configured roots, one message whatever the filesystem holds (no probing),
and at most `max_loaded_models` loaded, least recently used unloaded first."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workers.lm import ModelLoadError
from workers.lm.registry import _CACHE, HF_UNAVAILABLE, get_scorer


@pytest.fixture
def settings_env(monkeypatch):
    from app.settings import get_settings

    def apply(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"MEMAUDIT_{name.upper()}", value)
        get_settings.cache_clear()

    yield apply
    get_settings.cache_clear()


@pytest.fixture(autouse=True)
def empty_cache():
    saved = dict(_CACHE)
    _CACHE.clear()
    yield
    _CACHE.clear()
    _CACHE.update(saved)


def refusal(name: str) -> str:
    with pytest.raises(ModelLoadError) as caught:
        get_scorer(name)
    return str(caught.value)


def test_hf_errors_do_not_tell_what_exists(tmp_path: Path, tiny_dir: Path, caplog):
    a_file, not_a_model = tmp_path / "notes.txt", tmp_path / "empty"
    a_file.write_text("x")
    not_a_model.mkdir()
    names = ["hf:/etc", "hf:/etc/passwd", "hf:/no/such/dir", f"hf:{a_file}", f"hf:{not_a_model}", "hf:org/not-cached"]
    messages = {refusal(name) for name in names}
    assert messages == {HF_UNAVAILABLE}, messages
    assert "does not exist" in caplog.text, "the worker's log keeps the reason"


def test_hf_paths_only_under_the_model_roots(tmp_path: Path, tiny_dir: Path, settings_env):
    root = tmp_path / "models"
    shutil.copytree(tiny_dir, root / "tiny")
    (root / "escape").symlink_to(tiny_dir)  # a link inside the root to a model outside it
    settings_env(model_roots=f'["{root}"]')
    assert get_scorer(f"hf:{root}/tiny").fingerprint
    for outside in (f"hf:{tiny_dir}", f"hf:{root}/../{tiny_dir.name}", f"hf:{root}/escape", "hf:org/model"):
        assert refusal(outside) == HF_UNAVAILABLE, outside


def test_production_without_roots_loads_no_hf_model(tiny_dir: Path, settings_env):
    settings_env(env="production", key_pepper="a-long-random-production-secret")
    assert refusal(f"hf:{tiny_dir}") == HF_UNAVAILABLE


# Run in a fresh interpreter: the cache is process-wide, and an embedded runner's thread left by an earlier test in
# this worker process may load a model of its own meanwhile (CI once saw groundtruth-tiny evict m0 mid-test).
_LRU_CHECK = """
import sys
from workers.lm.registry import _CACHE, get_scorer
dirs = sys.argv[1:4]
first = get_scorer(f"hf:{dirs[0]}")
get_scorer(f"hf:{dirs[1]}")
assert get_scorer(f"hf:{dirs[0]}/./") is first, "spellings of one path share one loaded model"
get_scorer(f"hf:{dirs[2]}")  # evicts m1, the least recently used
assert len(_CACHE) == 2, list(_CACHE)
assert get_scorer(f"hf:{dirs[0]}") is first
assert sorted(_CACHE) == sorted(f"hf:{d}" for d in (dirs[0], dirs[2])), list(_CACHE)
print("lru ok")
"""


def test_loaded_models_are_bounded_least_recently_used_first(tmp_path: Path, tiny_dir: Path):
    dirs = []
    for i in range(3):
        shutil.copytree(tiny_dir, tmp_path / f"m{i}")
        dirs.append(str(tmp_path / f"m{i}"))
    env = {**os.environ, "MEMAUDIT_MAX_LOADED_MODELS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", _LRU_CHECK, *dirs], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0 and "lru ok" in done.stdout, done.stderr[-3000:]
