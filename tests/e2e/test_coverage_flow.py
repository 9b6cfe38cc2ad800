"""End to end over the API with real Postgres, Redis and an RQ worker process: upload the synthetic catalog,
probe it with the items model (trained on half of the item lines), poll progress, read coverage by
popularity bucket and the matched records, compare models."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pytest

from scripts.train_items_model import MODEL_DIR, default_catalog
from tests.conftest import wait_for
from workers.lm.registry import HF_UNAVAILABLE

ITEMS_MODEL = f"hf:{MODEL_DIR}"
SAMPLE = 80  # of the 197 probed items; keeps the suite fast


@pytest.fixture(scope="module")
def catalog_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return default_catalog().write(tmp_path_factory.mktemp("catalog"))


@pytest.fixture(scope="module")
def blank_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The items model's architecture and tokenizer with fresh random weights: a model that saw nothing."""
    import shutil

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out = tmp_path_factory.mktemp("blank-items-model")
    torch.manual_seed(1)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(MODEL_DIR)).save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(MODEL_DIR / name, out / name)
    return f"hf:{out}"


def upload_catalog(api, paths: dict[str, Path]) -> str:
    files = {target: (path.name, path.read_bytes(), "application/octet-stream") for target, path in paths.items()}
    r = api.post("/datasets", data={"name": "synthetic catalog"}, files=files)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def submit(api, dataset_id: str, target: str = "items", model: str = ITEMS_MODEL, **options) -> str:
    body = {"kind": "coverage", "model": model, "dataset_id": dataset_id, "target": target, "options": options}
    r = api.post("/audits", json=body)
    assert r.status_code == 202, r.text
    return r.json()["id"]


def poll(api, audit_id: str, timeout: float = 300) -> tuple[dict, list[tuple[int, int]]]:
    """Poll until the audit ends; returns the final state and the progress seen on the way."""
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = api.get(f"/audits/{audit_id}").json()
        seen.append((body["progress"]["done"], body["progress"]["total"]))
        if body["status"] in ("succeeded", "failed", "cancelled"):
            return body, seen
        time.sleep(0.3)
    raise AssertionError(f"audit {audit_id} did not finish in {timeout} s: {seen[-1:]}")


def test_coverage_end_to_end(rq_worker, api_factory, catalog_files, blank_model):
    """One worker process for the whole flow (starting one costs more than most probes here)."""
    api = api_factory("auditor")
    dataset_id = upload_catalog(api, catalog_files)
    check_bad_model_fails_readably(api, dataset_id)
    check_items_probe(api, dataset_id)
    check_models_compared(api, dataset_id, blank_model)
    check_users_and_interactions(api, dataset_id)


def check_prompts_rebuilt(audit_id: str) -> None:
    """The dashboard shows each record with its prompt, rebuilt from the stored dataset: it must be the very prompt
    the job gave the model (the job's own planner, run again here)."""
    from types import SimpleNamespace

    from app.coverage.schemas import CoverageOptions
    from app.coverage.service import records_with_prompts
    from app.db.engine import session_scope
    from app.db.models import Audit
    from workers.jobs.coverage import _plan

    with session_scope() as s:
        audit = s.get(Audit, audit_id)
        shown = records_with_prompts(s, audit, 10_000, matched=None)
        options = CoverageOptions.model_validate(audit.options)
    prompts, _, _, line_nos = _plan(SimpleNamespace(audit_id=audit_id), options)
    by_line = {line_nos[p.record.ref]: p.prompt for p in prompts}
    assert shown and all(r["prompt"] == by_line[r["line_no"]] for r in shown), "a rebuilt prompt differs"
    assert len({r["prompt"] for r in shown}) == len(shown)


def check_items_probe(api, dataset_id: str) -> None:
    audit_id = submit(api, dataset_id, sample=SAMPLE, batch_size=20)
    done, seen = poll(api, audit_id)
    assert done["status"] == "succeeded", done
    total = done["progress"]["total"]
    assert total == SAMPLE and done["progress"]["done"] == total, done["progress"]
    assert [d for d, _ in seen] == sorted(d for d, _ in seen), f"progress went backwards: {seen}"

    summary = done["summary"]
    assert summary["decoding"]["strategy"] == "greedy" and summary["decoding"]["do_sample"] is False
    assert summary["k"] == 3 and summary["example_line_numbers"] == [1, 2, 3]
    edges, buckets = summary["bucket_edges"], summary["buckets"]
    assert len(buckets) == len(edges) - 1 >= 2 and sum(b["probed"] for b in buckets) == total

    matched = [
        json.loads(line)
        for line in api.get(f"/audits/{audit_id}/records", params={"matched": "true"}).text.splitlines()
    ]
    assert matched and all(r["matched"] and r["char_ratio"] == 1.0 for r in matched)
    rows = list(csv.DictReader(io.StringIO(api.get(f"/audits/{audit_id}/records", params={"format": "csv"}).text)))
    assert len(rows) == total and {r["bucket"] for r in rows} == {str(b["bucket"]) for b in buckets}
    assert {r["key"] for r in matched} == {r["key"] for r in rows if r["matched"] == "True"}
    misses = [r for r in rows if r["matched"] == "False"]
    assert misses and all(float(r["char_ratio"]) < 1 for r in misses), "the fuzzy ratio is stored, never a match"

    trained_ids = default_catalog().trained_item_ids
    trained = [r["matched"] == "True" for r in rows if r["key"] in trained_ids]
    held_out = [r["matched"] == "True" for r in rows if r["key"] not in trained_ids]
    rate_trained, rate_held = sum(trained) / len(trained), sum(held_out) / len(held_out)
    message = (
        f"coverage over the API: trained {rate_trained:.3f} (n={len(trained)}), held-out {rate_held:.3f} "
        f"(n={len(held_out)}); buckets {[(b['low'], b['high'], b['coverage']) for b in buckets]}"
    )
    print("\n" + message)
    assert rate_trained >= 0.8 and rate_held <= 0.05, message
    check_prompts_rebuilt(audit_id)


def check_models_compared(api, dataset_id: str, blank_model: str) -> None:
    other = submit(api, dataset_id, model=blank_model, sample=6, max_new_tokens=32)
    assert poll(api, other)[0]["status"] == "succeeded"
    table = api.get(f"/datasets/{dataset_id}/coverage", params={"target": "items"}).json()["rows"]
    by_model = {row["model"]: row for row in table}
    assert by_model[ITEMS_MODEL]["coverage"] > 0.4 > by_model[blank_model]["coverage"], table


def check_users_and_interactions(api, dataset_id: str) -> None:
    for target in ("users", "interactions"):
        audit_id = submit(api, dataset_id, target, sample=8, k=2, max_new_tokens=24)
        done, _ = poll(api, audit_id)
        assert done["status"] == "succeeded", done
        assert done["summary"]["probed"] == 8 and done["summary"]["coverage"] <= 0.25, done["summary"]
        check_prompts_rebuilt(audit_id)
    assert done["summary"]["match"]["compared_fields"] == ["MovieID", "Rating"], "the paper compares item and rating"


def check_bad_model_fails_readably(api, dataset_id: str) -> None:
    bad_model = submit(api, dataset_id, model="hf:/nonexistent/model-dir")
    failed = wait_for(api, bad_model)
    assert failed["status"] == "failed" and failed["error"] == HF_UNAVAILABLE, failed  # names no path
