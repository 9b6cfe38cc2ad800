"""Value embeddings from the packaged all-MiniLM-L6-v2: the near-duplicate relaxation merges what it should."""

from __future__ import annotations

import numpy as np

from core.measures.wikimem import near_duplicates
from workers.embeddings import embed_values


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
