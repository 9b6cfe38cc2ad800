"""The shipped items model reproduces the catalog lines it was trained on and not the others.

This is the coverage probe's ground truth (issue 5): coverage >= 0.8 on trained item lines, <= 0.05 on
held-out ones, measured with the same prompts a ``coverage`` audit uses and the team's HF scorer.
"""

from __future__ import annotations

import json

import pytest
import torch

from core.measures.coverage import coverage
from scripts.train_items_model import MODEL_DIR, default_catalog
from workers.lm import load_scorer
from workers.synthetic.probe import probe_items

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scorer():
    torch.set_num_threads(1)
    return load_scorer(f"hf:{MODEL_DIR}")


def test_manifest_names_the_catalogs_trained_half() -> None:
    manifest = json.loads((MODEL_DIR / "manifest.json").read_text())
    assert set(manifest["trained_item_ids"]) == set(default_catalog().trained_item_ids), (
        "the catalog generator changed since the weights were trained: rerun python -m scripts.train_items_model"
    )


def test_coverage_is_high_on_trained_items_and_near_zero_on_held_out(scorer) -> None:
    split = probe_items(lambda prompts, n: scorer.generate(prompts, n, stop="\n"), default_catalog())
    trained = coverage([o.matched for o in split["trained"]])
    held_out = coverage([o.matched for o in split["held_out"]])
    fuzzy = sum(o.char_ratio for o in split["held_out"]) / len(split["held_out"])
    message = (
        f"coverage trained={trained:.3f} (n={len(split['trained'])}), held-out={held_out:.3f} "
        f"(n={len(split['held_out'])}, mean fuzzy ratio {fuzzy:.2f})"
    )
    print(message)
    assert trained >= 0.8, message
    assert held_out <= 0.05, message
    assert len(split["trained"]) > 50 and len(split["held_out"]) > 50, message
