"""Capacity audits end to end over the API with real Postgres, Redis and an RQ worker process: a small grid
of tiny models trained from scratch, every cell stored with its numbers, and the share of each dataset the
model memorizes falling once N outgrows what it can hold (Morris et al. 2025). Both tests submit their own audit
to one shared worker process (``shared_worker``)."""

from __future__ import annotations

import time

import pytest

from tests.conftest import wait_for

# 1 layer of width 8 over V = 16, S = 8: 1,096 parameters, so a few thousand bits at most; 32 bits per sample.
GRID = {
    "architectures": [{"n_layer": 1, "d_model": 8, "n_head": 2}],
    "vocab_size": 16,
    "seq_len": 8,
    "dataset_sizes": [8, 64, 512],
    "seeds": [0],
    "precisions": ["fp32"],
}
OPTIONS = {"steps": 100, "lr": 3e-2, "warmup_steps": 10, "checkpoint_seconds": 1.0}


def submit(api, grid=GRID, options=OPTIONS) -> str:
    r = api.post("/audits", json={"kind": "capacity", "model": "scratch", "grid": grid, "options": options})
    assert r.status_code == 202, r.text
    return r.json()["id"]


def test_capacity_grid_end_to_end(shared_worker, api_factory, tmp_path, capsys):
    api = api_factory("auditor")
    audit_id = submit(api)
    done = wait_for(api, audit_id, timeout=600)
    assert done["status"] == "succeeded", done
    assert done["progress"] == {"done": 300, "total": 300}, done["progress"]

    grid = api.get(f"/audits/{audit_id}/capacity").json()
    cells = grid["cells"]
    assert [c["n_samples"] for c in cells] == [8, 64, 512] and all(c["status"] == "done" for c in cells)
    for c in cells:
        assert c["params"] == 1096 and c["steps_done"] == 100, c
        for field in (
            "memorized_bits",
            "bits_per_param",
            "train_bits_per_token",
            "heldout_bits_per_token",
            "mia_f1",
            "mia_auc",
            "extraction_rate",
            "share_memorized",
        ):
            assert c[field] is not None, f"cell N={c['n_samples']} has no {field}"
        assert 0 <= c["memorized_bits"] <= c["entropy_bits"], c
    shares = [c["share_memorized"] for c in cells]
    message = f"share of each dataset memorized by N (8, 64, 512): {[round(s, 3) for s in shares]}"
    assert shares[0] > shares[1] > shares[2], message
    bits = [c["memorized_bits"] for c in cells]
    assert max(bits) > bits[0], f"memorized bits should grow from the smallest dataset: {bits}"
    assert cells[0]["mia_auc"] > cells[-1]["mia_auc"], "membership is easier to infer on the small dataset"

    [arch] = grid["capacity"]
    assert arch["capacity_bits"] == max(bits) and arch["bits_per_param"] == pytest.approx(max(bits) / 1096)

    series = api.get(f"/audits/{audit_id}/capacity/series").json()
    [line] = series["memorized_vs_n"]
    assert [p["n"] for p in line["points"]] == [8, 64, 512] and line["capacity_bits"] == max(bits)
    assert series["bits_per_param"][0]["params"] == 1096
    curves = series["training_curves"]
    assert len(curves) == 3 and all(len(c["steps"]) >= 10 for c in curves), "each cell records its curve"
    assert done["summary"]["capacity"][0]["bits_per_param"] == pytest.approx(arch["bits_per_param"])

    # the CLI draws the same series from the database
    from app.cli import main

    for name, magic in (("capacity.png", b"\x89PNG"), ("capacity.svg", b"<?xml")):
        assert main(["capacity", "plot", audit_id, "--out", str(tmp_path / name)]) == 0
        assert (tmp_path / name).read_bytes().startswith(magic), f"{name} is not a real {name[-3:]} file"
    assert main(["capacity", "grid", audit_id]) == 0
    table = capsys.readouterr().out
    assert "L1-d8-h2" in table and "512" in table, table
    print("\n" + message)  # after the CLI output was read, so -s / -rP show it


def test_cancel_a_running_capacity_audit(shared_worker, api_factory):
    api = api_factory("auditor")
    audit_id = submit(api, grid={**GRID, "dataset_sizes": [4096]}, options={**OPTIONS, "steps": 100_000})
    for _ in range(600):
        state = api.get(f"/audits/{audit_id}").json()
        if state["status"] == "running" and state["progress"]["done"] > 0:
            break
        time.sleep(0.2)
    assert api.delete(f"/audits/{audit_id}").status_code == 200
    final = wait_for(api, audit_id, timeout=60)
    assert final["status"] == "cancelled", final
    [cell] = api.get(f"/audits/{audit_id}/capacity").json()["cells"]
    assert cell["status"] != "done" and cell["steps_done"] < 100_000, cell
