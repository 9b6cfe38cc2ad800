"""train_tiny_lm: a tokenizer + tiny Llama trained from scratch that the Auto classes load back."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from workers.groundtruth.scoring import SentenceScorer
from workers.groundtruth.tinylm import EOT, train_tiny_lm

WORDS = [
    "amber",
    "birch",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "grove",
    "heron",
    "iris",
    "juniper",
    "kelp",
    "lotus",
    "maple",
    "nectar",
    "onyx",
    "pearl",
]


def make_lines(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{i:03d}::{' '.join(rng.sample(WORDS, 4))}" for i in range(n)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], list[str]]:
    lines = make_lines(40, seed=1)
    trained, held_out = lines[:20], lines[20:]
    out, stats = train_tiny_lm(
        trained,
        tmp_path_factory.mktemp("tiny"),
        seed=0,
        vocab_size=300,
        n_layer=1,
        d_model=64,
        n_head=2,
        epochs=20,
        batch_size=8,
        lr=5e-3,
        warmup_steps=10,
        log=None,
    )
    assert stats.steps == 20 * 3 and stats.final_loss < 3.0, stats
    return out, trained, held_out


def test_saved_directory_loads_with_auto_classes(tiny: tuple[Path, list[str], list[str]]) -> None:
    out, _, _ = tiny
    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert (out / "model.safetensors").is_file()
    assert tokenizer.bos_token == EOT and tokenizer.bos_token_id == 0 == model.config.bos_token_id
    ids = tokenizer("Zyx Ünïcode 名字", add_special_tokens=False)["input_ids"]
    assert ids and 0 not in ids, "the tokenizer must not add <|endoftext|> itself"
    assert tokenizer.decode(ids) == "Zyx Ünïcode 名字", "byte-level BPE must round-trip unseen text"


def test_training_documents_become_more_likely_than_unseen_ones(tiny: tuple[Path, list[str], list[str]]) -> None:
    out, trained, held_out = tiny
    torch.set_num_threads(1)
    scorer = SentenceScorer(out)
    nll_trained = scorer.nll(trained)
    nll_held_out = scorer.nll(held_out)
    mean_t = sum(nll_trained) / len(nll_trained)
    mean_h = sum(nll_held_out) / len(nll_held_out)
    assert mean_t + 10.0 < mean_h, f"mean NLL trained {mean_t:.2f} vs held-out {mean_h:.2f} nats"


def test_fresh_texts_are_drawn_once_per_epoch(tmp_path: Path) -> None:
    calls: list[int] = []

    def fresh(epoch: int) -> list[str]:
        calls.append(epoch)
        return make_lines(8, seed=100 + epoch)

    _, stats = train_tiny_lm(
        make_lines(8, seed=1),
        tmp_path,
        seed=0,
        vocab_size=300,
        n_layer=1,
        d_model=32,
        n_head=2,
        epochs=3,
        batch_size=8,
        warmup_steps=1,
        fresh_texts=fresh,
        log=None,
    )
    # epoch 0 is drawn for the tokenizer and for training; every later epoch exactly once
    assert sorted(set(calls)) == [0, 1, 2] and calls.count(1) == calls.count(2) == 1, calls
    assert stats.steps == 3 * 2, stats
