"""Value embeddings from the packaged all-MiniLM-L6-v2: the near-duplicate relaxation merges what it should."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core.measures.wikimem import near_duplicates
from workers.embeddings import EmbeddingUnavailable, check_pooling, embed_values, model_dir


def test_values_separate_where_sentences_would_not():
    pairs = {
        ("English", "British English"): True,
        ("physicist", "theoretical physicist"): True,
        ("United States", "United States of America"): True,
        ("English", "German"): False,
        ("male", "female"): False,
    }
    for (a, b), merge in pairs.items():
        va, vb = embed_values([a, b])
        cos = float(np.dot(va, vb))
        assert (cos > 0.75) == merge, f"{a} / {b}: cosine {cos:.2f}"


def test_near_duplicates_of_a_ground_truth_on_real_embeddings():
    truths = ["English"]
    candidates = ["German", "British English", "French", "American English", "Japanese"]
    merged = near_duplicates(embed_values(truths), embed_values(candidates), 0.75)
    assert {candidates[i] for i, _, _ in merged} == {"British English", "American English"}, merged


def test_embeddings_are_unit_length_and_stable():
    first = embed_values(["physicist", "chemist"])
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert np.allclose(embed_values(["chemist"])[0], first[1])


def test_vectors_are_sentence_transformers_own():
    # minilm_reference.json: what sentence-transformers 6.2.0 itself computed for these values from the same package
    # (mean pooling, unit norm, 256-token truncation: the last value is 301 tokens long)
    reference = json.loads((Path(__file__).parent / "minilm_reference.json").read_text())
    ours = embed_values(reference["values"])
    gap = np.abs(ours - np.array(reference["vectors"], dtype=np.float32)).max()
    assert gap < 1e-5, f"largest difference from sentence-transformers' vectors: {gap:.2e}"


@pytest.mark.parametrize("other", ["pooling_mode_cls_token", "pooling_mode_max_tokens"])
def test_a_package_whose_pooling_is_not_the_mean_is_refused(tmp_path, other):
    pooling = json.loads((model_dir() / "1_Pooling" / "config.json").read_text())
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling | {other: True}))
    with pytest.raises(EmbeddingUnavailable, match="not mean pooling"):
        check_pooling(tmp_path)
