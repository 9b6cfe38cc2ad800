"""What a "no" is worth, in terms of the limit of detection: app.subjects.detection states the LoD the benchmark
measured (benchmarks/results/limit_of_detection.json), and the CLI line and the person's words say it."""

from __future__ import annotations

import json
from pathlib import Path

from app.subjects import detection

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "limit_of_detection.json"


def test_the_stated_limit_is_the_measured_one():
    measured = json.loads(RESULTS.read_text(encoding="utf-8"))
    pooled = measured["lod"]["pooled"]["logistic"]
    occupation = measured["lod_by_property"]["P106"]["logistic"]
    stated = detection.LIMITS[measured["model"]]
    assert (stated.lod50, stated.lod90) == (str(pooled["lod50"]), str(pooled["lod90"]))
    assert stated.occupation_lod50 == str(occupation["lod50"])
    assert stated.on == measured["model"]


def test_a_no_on_a_model_of_the_taught_size_says_the_limit():
    limit = detection.LIMITS["smollm2-135m"]
    for model in ("smollm2-135m", "smollm2-taught"):
        line = detection.miss_line(model, ["P106"])
        assert f"90 % at {limit.lod90}" in line and "Limit of detection" in line, line
        assert "taught a model of this size invented people" in detection.miss_words(model)
    assert "Limit of detection" not in detection.miss_line("groundtruth-tiny", ["P106"])
    assert "taught a model" not in detection.miss_words("groundtruth-tiny")
