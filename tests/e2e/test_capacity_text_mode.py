"""Text-mode capacity audit on the embedded default (SQLite + in-process worker): per-sample unintended
memorization of the coverage items model (trained on exactly half of the synthetic item lines) against a
reference with the same tokenizer and no training. Trained lines must carry more memorized bits."""

from __future__ import annotations

import shutil

import pytest

from scripts.train_items_model import MODEL_DIR, default_catalog
from tests.conftest import wait_for


@pytest.fixture(scope="module")
def untrained_reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out = tmp_path_factory.mktemp("untrained-items-model")
    torch.manual_seed(1)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(MODEL_DIR)).save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(MODEL_DIR / name, out / name)
    return f"hf:{out}"


def test_text_mode_ranks_trained_samples_as_memorized(sqlite_env, api_factory, untrained_reference):
    catalog = default_catalog()
    trained, held_out = catalog.trained_items[:12], catalog.held_out_items[:12]
    api = api_factory("auditor")
    body = {
        "kind": "capacity",
        "model": f"hf:{MODEL_DIR}",
        "mode": "text",
        "text": {"texts": trained + held_out, "reference": untrained_reference},
    }
    r = api.post("/audits", json=body)
    assert r.status_code == 202, r.text
    done = wait_for(api, r.json()["id"], timeout=300)
    assert done["status"] == "succeeded", done

    result = api.get(f"/audits/{done['id']}/capacity/texts", params={"limit": 24}).json()
    samples = result["samples"]
    assert len(samples) == 24 and all(s["memorized_bits"] is not None and s["rarity"] is not None for s in samples)
    mem = [s["memorized_bits"] for s in samples]
    assert mem == sorted(mem, reverse=True), "most memorized first"
    by_text = {s["text"]: s for s in samples}
    for s in samples:
        assert s["memorized_bits"] == pytest.approx(max(0.0, s["nll_reference_bits"] - s["nll_model_bits"]))
    mean_trained = sum(by_text[t]["memorized_bits"] for t in trained) / len(trained)
    mean_held = sum(by_text[t]["memorized_bits"] for t in held_out) / len(held_out)
    top = sum(s["text"] in trained for s in samples[:12])
    message = (
        f"mean mem_U: trained lines {mean_trained:.1f} bits, held-out lines {mean_held:.1f} bits; "
        f"{top}/12 of the most memorized are trained lines"
    )
    print("\n" + message)
    assert mean_trained > mean_held + 5 and top >= 9, message
    assert result["total_memorized_bits"] == pytest.approx(sum(mem))
