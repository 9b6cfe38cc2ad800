"""Probe a model's coverage of the synthetic catalog's items, split by training membership.

    python -m workers.synthetic.probe --model smollm2-135m [--sample 60] [--k 3]
    python -m workers.synthetic.probe --model hf:workers/synthetic/items_model

Prints coverage and the mean fuzzy ratio for the trained and the held-out halves and per popularity
bucket. The few-shot prompt is the same as in a ``coverage`` audit (core.measures.coverage).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Callable, Sequence

import torch

from core.measures.coverage import (
    DEFAULT_K,
    Outcome,
    ProbeRecord,
    generation_budget,
    judge,
    record_prompts,
    summarise,
)
from workers.lm import load_scorer
from workers.synthetic.catalog import SyntheticCatalog, default_catalog

Generate = Callable[[Sequence[str], int], list[str]]


def item_records(catalog: SyntheticCatalog) -> list[ProbeRecord]:
    popularity = Counter(line.split("::")[1] for line in catalog.interactions)
    keys = [catalog.item_id(line) for line in catalog.items]
    return [ProbeRecord(key, line, float(popularity[key])) for key, line in zip(keys, catalog.items, strict=True)]


def probe_items(
    generate: Generate, catalog: SyntheticCatalog, *, k: int = DEFAULT_K, sample: int | None = None, seed: int = 0
) -> dict[str, list[Outcome]]:
    """Outcomes of the items probe, split into the ``trained`` and ``held_out`` halves."""
    prompts = record_prompts(item_records(catalog), "::", k=k, sample=sample, seed=seed)
    generated = generate([p.prompt for p in prompts], generation_budget([p.expected for p in prompts]))
    split: dict[str, list[Outcome]] = {"trained": [], "held_out": []}
    for prompt, text in zip(prompts, generated, strict=True):
        half = "trained" if prompt.record.key in catalog.trained_item_ids else "held_out"
        split[half].append(judge(prompt, text, "::"))
    return split


def report(split: dict[str, list[Outcome]], n_buckets: int = 4) -> dict:
    return {half: summarise(outcomes, n_buckets) for half, outcomes in split.items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--k", type=int, default=DEFAULT_K)
    parser.add_argument("--sample", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    scorer = load_scorer(args.model)
    split = probe_items(
        lambda prompts, n: scorer.generate(prompts, n, stop="\n"), default_catalog(), k=args.k, sample=args.sample
    )
    print(json.dumps(report(split), indent=1))
    for half, outcomes in split.items():
        for outcome in outcomes[:3]:
            print(f"{half}: {outcome.key}:: expected {outcome.expected!r} got {outcome.generated!r}")


if __name__ == "__main__":
    main()
