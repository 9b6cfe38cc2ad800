"""Scorers report progress from inside their work (every batch of a few hundred tokens), not once per call."""

from __future__ import annotations

import pytest

from core.catalog import load_catalog, split_template
from workers.lm import load_scorer


@pytest.fixture(scope="module")
def groundtruth():
    return load_scorer("groundtruth-tiny")


def wikimem_pairs(n_values: int = 100) -> list[tuple[str, str]]:
    """A subject audit's shape: every template of two properties × subject variants × candidate values."""
    catalog = load_catalog()
    pairs = []
    for pid in ("P106", "P27"):
        prop = catalog.get(pid)
        for template in prop.templates:
            for subject in ("Yselda Calderwick", "This person", "Ysolde Calderwick"):
                pairs += [split_template(template, subject, value) for value in prop.pool[:n_values]]
    return pairs


def test_progress_arrives_in_many_steps_below_the_total(groundtruth) -> None:
    pairs = wikimem_pairs()
    seen: list[int] = []
    values = groundtruth.score(pairs, on_progress=seen.append)
    assert len(pairs) > 2000, "the workload should be bigger than one SCORE_CHUNK of the subject job"
    assert seen[-1] == len(pairs) and seen == sorted(seen), seen[:20]
    below = [n for n in seen if n < len(pairs)]
    assert len(below) >= 10, f"only {len(below)} progress reports below {len(pairs)} sentences"
    # the first report comes after a small share of the work, not after the first whole prefix chunk
    assert below[0] <= len(pairs) // 4, below[:5]
    assert values == groundtruth.score(pairs), "reporting progress must not change a single NLL"


def test_whole_sentence_fallback_reports_progress_too(groundtruth) -> None:
    pairs = wikimem_pairs(30)
    engine, groundtruth.engine = groundtruth.engine, None  # the path models the engine cannot handle take
    try:
        seen: list[int] = []
        values = groundtruth.score(pairs, on_progress=seen.append)
    finally:
        groundtruth.engine = engine
    assert seen[-1] == len(pairs) and len([n for n in seen if n < len(pairs)]) >= 3, seen
    assert values == pytest.approx(groundtruth.score(pairs), abs=1e-3)


def test_duplicates_count_as_inputs(groundtruth) -> None:
    pairs = wikimem_pairs(20)
    seen: list[int] = []
    groundtruth.score(pairs + pairs[:50], on_progress=seen.append)
    assert seen[-1] == len(pairs) + 50
