"""Train the coverage ground-truth model: a tiny LM that has seen exactly half of the synthetic items.

    python -m scripts.train_items_model [--out workers/synthetic/items_model]

The training documents are runs of trained item lines in the ``movies.dat`` format, shuffled, so the model
learns to continue "<id>::" after a few other lines: the shape of a coverage prompt. Held-out item lines
never appear in training (nor in the tokenizer's corpus). ``manifest.json`` records the catalog settings,
the seed and which item ids were trained.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from workers.groundtruth.tinylm import train_tiny_lm
from workers.synthetic.catalog import CATALOG_SETTINGS, ITEMS_MODEL_DIR, SEED, default_catalog

MODEL_DIR = ITEMS_MODEL_DIR
LINES_PER_DOCUMENT = 6
SHUFFLES = 40
TRAIN_SETTINGS: dict = {
    "vocab_size": 1024,
    "n_layer": 2,
    "d_model": 128,
    "n_head": 4,
    "max_len": 192,
    "epochs": 6.0,
    "batch_size": 32,
    "lr": 3e-3,
    "warmup_steps": 50,
}


def training_documents(lines: Sequence[str], seed: int, shuffles: int = SHUFFLES) -> list[str]:
    """``shuffles`` random orders of ``lines``, cut into documents of LINES_PER_DOCUMENT lines each."""
    rng = random.Random(seed)
    docs: list[str] = []
    for _ in range(shuffles):
        order = list(lines)
        rng.shuffle(order)
        for start in range(0, len(order), LINES_PER_DOCUMENT):
            docs.append("".join(f"{line}\n" for line in order[start : start + LINES_PER_DOCUMENT]))
    return docs


def train(out_dir: Path = MODEL_DIR, *, threads: int | None = 1, **overrides) -> dict:
    """Train and save the model with its manifest; returns the manifest."""
    catalog = default_catalog()
    trained = catalog.trained_items
    settings = {**TRAIN_SETTINGS, **overrides}
    _, stats = train_tiny_lm(training_documents(trained, SEED), out_dir, seed=SEED, threads=threads, **settings)
    manifest = {
        "purpose": "coverage ground truth: trained on exactly the items listed in trained_item_ids",
        "catalog": {**CATALOG_SETTINGS, "per_user": list(CATALOG_SETTINGS["per_user"])},
        "seed": SEED,
        "lines_per_document": LINES_PER_DOCUMENT,
        "shuffles": SHUFFLES,
        "train_settings": settings,
        "stats": asdict(stats),
        "trained_item_ids": sorted(catalog.trained_item_ids, key=int),
    }
    (Path(out_dir) / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=MODEL_DIR)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--epochs", type=float, default=TRAIN_SETTINGS["epochs"])
    args = parser.parse_args(argv)
    manifest = train(args.out, threads=args.threads, epochs=args.epochs)
    print(json.dumps(manifest["stats"], indent=1))


if __name__ == "__main__":
    main()
