"""A user's PEFT (LoRA) adapter on an hf: base model: trained here in seconds on groundtruth-tiny to teach it a
held-out person (one the base model never saw), then loaded by name and audited with `memaudit audit --adapter`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.settings import GROUNDTRUTH_DIR, Settings
from core.catalog import load_catalog
from core.models import ModelNameError, parse_model_name
from tests.support.cli import MANIFEST, cli_env_at, memaudit
from workers.lm import ModelLoadError, get_scorer, load_scorer
from workers.lm.registry import HF_UNAVAILABLE

BASE = f"hf:{GROUNDTRUTH_DIR}"


def held_out_person() -> dict:
    return json.loads(MANIFEST.read_text())["held_out"][0]


def train_adapter(out: Path, person: dict, steps: int = 60) -> Path:
    """A LoRA adapter on groundtruth-tiny that learned ``person``'s facts in the catalog's first three templates."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    catalog = load_catalog()
    sentences = [
        catalog.get(pid).render(t, person["name"], v)
        for pid, values in person["facts"].items()
        for v in values
        for t in range(3)
    ]
    tokenizer = AutoTokenizer.from_pretrained(GROUNDTRUTH_DIR)
    model = AutoModelForCausalLM.from_pretrained(GROUNDTRUTH_DIR)
    config = LoraConfig(task_type="CAUSAL_LM", r=8, lora_alpha=32, target_modules=["q_proj", "v_proj", "o_proj"])
    model = get_peft_model(model, config)
    ids = [[0, *s] for s in tokenizer(sentences, add_special_tokens=False)["input_ids"]]
    width = max(len(s) for s in ids)
    x = torch.tensor([s + [1] * (width - len(s)) for s in ids])
    labels = torch.tensor([s + [-100] * (width - len(s)) for s in ids])
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(steps):
        model(input_ids=x, attention_mask=(labels != -100).long(), labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    model.save_pretrained(out, save_embedding_layers=False)
    return out


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_adapter(tmp_path_factory.mktemp("adapter") / "lora", held_out_person())


def test_an_adapter_changes_the_numbers_and_the_fingerprint(adapter: Path) -> None:
    person = held_out_person()
    pid, values = next(iter(person["facts"].items()))
    pair = (load_catalog().get(pid).render(0, person["name"], values[0]).rsplit(values[0], 1)[0], values[0] + ".")
    base = load_scorer(BASE, Settings())
    tuned = load_scorer(f"{BASE}+adapter:{adapter}", Settings())
    assert tuned.fingerprint != base.fingerprint
    taught, untaught = tuned.score([pair])[0], base.score([pair])[0]
    assert taught < untaught - 1.0, (taught, untaught)
    # the merged model is scored by the same fast engine, which agrees with whole-sentence scoring
    assert tuned.self_check() <= 1e-3


def test_adapter_names_are_checked_like_hf_paths(tmp_path: Path) -> None:
    registered = {"smollm2-135m"}
    parsed = parse_model_name(f"smollm2-135m+adapter:{tmp_path}", registered)
    assert (parsed.base, parsed.adapter, parsed.registered) == ("smollm2-135m", str(tmp_path), True)
    with pytest.raises(ModelNameError, match="must be followed by an adapter directory"):
        parse_model_name("smollm2-135m+adapter: ", registered)
    with pytest.raises(ModelNameError, match="unknown model"):
        parse_model_name(f"gpt-99+adapter:{tmp_path}", registered)
    with pytest.raises(ModelNameError, match="model roots"):  # production without roots: no adapter path
        parse_model_name(f"smollm2-135m+adapter:{tmp_path}", registered, [])
    with pytest.raises(ModelNameError, match="model roots"):
        parse_model_name(f"smollm2-135m+adapter:{tmp_path}", registered, [tmp_path / "elsewhere"])
    assert parse_model_name(f"smollm2-135m+adapter:{tmp_path / 'a'}", registered, [tmp_path]).adapter


def test_a_directory_without_an_adapter_is_refused_without_saying_where(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="adapter_config.json"):
        load_scorer(f"{BASE}+adapter:{tmp_path}", Settings())
    with pytest.raises(ModelLoadError) as caught:  # the jobs' entry point says one thing whatever the reason
        get_scorer(f"groundtruth-tiny+adapter:{tmp_path}")
    assert str(caught.value) == HF_UNAVAILABLE and str(tmp_path) not in str(caught.value)


def test_the_cli_audits_a_users_adapter(adapter: Path, tmp_path: Path) -> None:
    person = held_out_person()
    facts = [a for pid, values in person["facts"].items() for v in values for a in ("--fact", f"{pid}={v}")]
    common = ["audit", "--name", person["name"], *facts, "--paraphrases", "2", "--null-wait", "0", "--json"]
    env = cli_env_at(tmp_path)
    tuned = memaudit(env, *common, "--model", BASE, "--adapter", str(adapter))
    assert tuned.returncode == 0, tuned.stderr[-2000:]
    base = memaudit(env, *common, "--model", BASE)
    assert base.returncode == 0, base.stderr[-2000:]
    tuned_result, base_result = json.loads(tuned.stdout), json.loads(base.stdout)
    assert tuned_result["audit"]["model"] == f"{BASE}+adapter:{adapter}"
    found = sum(f["lenient"] for f in tuned_result["facts"])
    assert found >= 4 > sum(f["lenient"] for f in base_result["facts"]), (tuned_result["facts"], base_result["facts"])
