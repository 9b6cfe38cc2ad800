"""Regenerate the ground-truth model and its manifest:  python -m scripts.train_groundtruth [--no-eval]

Deterministic given RECIPE (fixed seeds) on the same torch build and thread count. Writes
workers/groundtruth/model/ (weights + tokenizer) and workers/groundtruth/manifest.json (who was trained, who was
held out, their facts, the templates that carried facts, training statistics, and — unless --no-eval — the
measured WikiMem rates). Takes a few minutes on one CPU thread.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import torch

from core.catalog import Catalog, load_catalog
from workers.groundtruth import evaluate
from workers.groundtruth.people import (
    GENERIC_SUBJECTS,
    PIDS,
    GroundTruthPerson,
    build_corpus,
    filler,
    make_people,
    split_templates,
)
from workers.groundtruth.tinylm import EOT, train_tiny_lm

HERE = Path(__file__).resolve().parent.parent / "workers" / "groundtruth"
MODEL_DIR = HERE / "model"
MANIFEST = HERE / "manifest.json"

RECIPE: dict = {
    "seed": 1234,
    "n_trained": 80,
    "n_held_out": 40,
    "n_trained_paraphrases": 3,  # + the baseline template; the other paraphrases never carry a person's fact
    "bios_per_person": 1,
    "filler_per_epoch": {"n_background": 2000, "n_generic": 600},  # drawn afresh each epoch
    "model": {"vocab_size": 1024, "n_layer": 2, "d_model": 128, "n_head": 4, "max_len": 128},
    "train": {"epochs": 30, "batch_size": 32, "lr": 3e-3, "weight_decay": 0.0, "warmup_steps": 100},
    "threads": 1,
}


def build(catalog: Catalog, recipe: dict) -> tuple[list[GroundTruthPerson], dict[str, list[int]], list[str]]:
    """People, the templates that carry their facts, and the fixed training documents."""
    people = make_people(catalog, n_trained=recipe["n_trained"], n_held_out=recipe["n_held_out"], seed=recipe["seed"])
    templates = split_templates(catalog, recipe["n_trained_paraphrases"], recipe["seed"])
    corpus = build_corpus(catalog, people, templates, seed=recipe["seed"], bios_per_person=recipe["bios_per_person"])
    return people, templates, corpus


def fresh_documents(catalog: Catalog, recipe: dict, people: Sequence[GroundTruthPerson]) -> Callable[[int], list[str]]:
    return functools.partial(filler, catalog, people, seed=recipe["seed"], **recipe["filler_per_epoch"])


def manifest_for(
    catalog: Catalog,
    recipe: dict,
    people: Sequence[GroundTruthPerson],
    templates: dict[str, list[int]],
    corpus: Sequence[str],
    stats: dict,
) -> dict:
    def person_json(p: GroundTruthPerson) -> dict:
        return {"name": p.name, "facts": {pid: list(v) for pid, v in p.facts.items()}}

    return {
        "model": "groundtruth-tiny",
        "model_dir": "model",
        "description": "Tiny Llama trained from scratch on sentences about fictitious people. 'trained' people's "
        "facts are in its training data, 'held_out' people's are not (they appear nowhere).",
        "scoring": {
            "prepend": EOT,
            "bos_token_id": 0,
            "note": "Scorers prepend <|endoftext|> (id 0) to every sentence; the tokenizer does not add it. "
            "NLL = sum over all tokens of the sentence after it.",
        },
        "recipe": recipe,
        "training": stats,
        "corpus": {
            "fixed_documents": len(corpus),
            "filler": "per epoch, drawn afresh: one-sentence mentions of long-tail names (other pool combinations, "
            "half-random and random names; never a trained or held-out name) and of generic subjects "
            f"{list(GENERIC_SUBJECTS)}, each with a random pool value in any template",
        },
        "properties": {
            pid: {
                "label": catalog.get(pid).label,
                "n_templates": len(catalog.get(pid).templates),
                "trained_templates": templates[pid],
                "unseen_templates": [t for t in range(len(catalog.get(pid).templates)) if t not in templates[pid]],
            }
            for pid in PIDS
        },
        "trained": [person_json(p) for p in people if p.split == "trained"],
        "held_out": [person_json(p) for p in people if p.split == "held_out"],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the ground-truth model and write its manifest.")
    parser.add_argument("--no-eval", action="store_true", help="skip measuring the WikiMem rates")
    parser.add_argument("--out", type=Path, default=MODEL_DIR)
    args = parser.parse_args(argv)
    recipe = RECIPE
    catalog = load_catalog()
    people, templates, corpus = build(catalog, recipe)
    tmp = args.out.with_name(args.out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    _, stats = train_tiny_lm(
        corpus,
        tmp,
        seed=recipe["seed"],
        threads=recipe["threads"],
        fresh_texts=fresh_documents(catalog, recipe, people),
        **recipe["model"],
        **recipe["train"],
    )
    shutil.rmtree(args.out, ignore_errors=True)
    tmp.rename(args.out)
    manifest = manifest_for(catalog, recipe, people, templates, corpus, {**asdict(stats), "torch": torch.__version__})
    manifest_path = MANIFEST if args.out == MODEL_DIR else args.out.with_name("manifest.json")
    _write(manifest_path, manifest)  # before measuring, which takes longer than training
    print(f"trained in {stats.seconds:.0f} s ({stats.steps} steps); manifest: {manifest_path}")
    if not args.no_eval:
        torch.set_num_threads(recipe["threads"])
        manifest["measured"] = evaluate.measure(args.out, manifest)
        evaluate.print_rates(manifest["measured"])
        _write(manifest_path, manifest)


def _write(path: Path, manifest: dict) -> None:
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
