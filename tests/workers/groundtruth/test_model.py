"""The shipped ground-truth model loads and knows its trained people's facts, not the held-out people's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from core.catalog import load_catalog
from workers.groundtruth.evaluate import fact_ranks
from workers.groundtruth.scoring import SentenceScorer

GT = Path(__file__).resolve().parents[3] / "workers" / "groundtruth"
PEOPLE_PER_SPLIT = 5
PIDS = ("P106", "P19")


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((GT / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def scorer() -> SentenceScorer:
    torch.set_num_threads(1)
    return SentenceScorer(GT / "model")


def test_loads_with_auto_classes_and_document_start_token(manifest: dict) -> None:
    model = AutoModelForCausalLM.from_pretrained(GT / "model")
    tokenizer = AutoTokenizer.from_pretrained(GT / "model")
    assert tokenizer.bos_token == manifest["scoring"]["prepend"] == "<|endoftext|>"
    assert tokenizer.bos_token_id == manifest["scoring"]["bos_token_id"] == 0
    assert tokenizer("Enaj Eod", add_special_tokens=False)["input_ids"][0] != 0, "tokenizer added a BOS itself"
    n_params = sum(p.numel() for p in model.parameters())
    size_mb = (GT / "model" / "model.safetensors").stat().st_size / 1e6
    assert n_params < 5_000_000 and size_mb < 20, f"{n_params} parameters, {size_mb:.1f} MB: not tiny"


def _rank1_share(scorer: SentenceScorer, people: list[dict], template: int) -> float:
    catalog = load_catalog()
    hits = [
        fact_ranks(scorer, catalog, p["name"], pid, p["facts"][pid], seed=i, templates=[template])[0] == 1
        for i, p in enumerate(people)
        for pid in PIDS
    ]
    return sum(hits) / len(hits)


def test_trained_facts_rank_first_and_held_out_facts_do_not(manifest: dict, scorer: SentenceScorer) -> None:
    """Baseline template, calibrated score, 100 counterfactuals: a few people of each split."""
    trained = _rank1_share(scorer, manifest["trained"][:PEOPLE_PER_SPLIT], template=0)
    held_out = _rank1_share(scorer, manifest["held_out"][:PEOPLE_PER_SPLIT], template=0)
    assert trained >= 0.8 and held_out <= 0.2, (
        f"baseline rank-1 share: trained {trained:.2f} (want >= 0.8), held out {held_out:.2f} (want <= 0.2)"
    )


def test_memorization_reaches_paraphrases_never_trained_on(manifest: dict, scorer: SentenceScorer) -> None:
    """Generalization: trained facts also surface through paraphrases that never carried them, held-out ones
    do not (two unseen paraphrases per property, a few people of each split)."""
    catalog = load_catalog()

    def share(split: str) -> float:
        hits = [
            rank == 1
            for i, p in enumerate(manifest[split][:PEOPLE_PER_SPLIT])
            for pid in PIDS
            for rank in fact_ranks(
                scorer,
                catalog,
                p["name"],
                pid,
                p["facts"][pid],
                seed=i,
                templates=manifest["properties"][pid]["unseen_templates"][:2],
            )
        ]
        return sum(hits) / len(hits)

    trained, held_out = share("trained"), share("held_out")
    assert trained >= held_out + 0.2, (
        f"rank-1 share through unseen paraphrases: trained {trained:.2f}, held out {held_out:.2f}"
    )
