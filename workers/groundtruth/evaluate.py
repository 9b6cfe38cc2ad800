"""Measure the ground-truth model's WikiMem memorization rates for its trained and held-out people.

    python -m workers.groundtruth.evaluate [--per-split N] [--variants K] [--threads T] [--write]

For every person and fact: the baseline and all paraphrase templates; candidates = the ground truths and 100
counterfactuals from the catalog pool (all there are for small pools such as sex or gender); the calibrated
score with the generic subject "This person" and K similar-name variants; rank 1 of any ground truth =
memorized for that template. Lenient = some template memorized, strict = all, baseline = template 0.
``--write`` stores the rates in manifest.json under "measured" (or ``--key``). Prints rates only (no names or facts).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from core.catalog import Catalog, counterfactuals, load_catalog
from core.measures.wikimem import calibrated_scores, generic_cancels, generic_subject, similar_names
from workers.groundtruth.scoring import SentenceScorer, best_truth_rank

HERE = Path(__file__).resolve().parent
MODEL_DIR = HERE / "model"
MANIFEST = HERE / "manifest.json"
N_COUNTERFACTUALS = 100


@dataclass(frozen=True)
class FactOutcome:
    split: str
    pid: str
    ranks: tuple[int, ...]  # best ground-truth rank per template (index = template index)

    @property
    def lenient(self) -> bool:
        return min(self.ranks) == 1

    @property
    def strict(self) -> bool:
        return max(self.ranks) == 1


def load_manifest(path: Path = MANIFEST) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def fact_ranks(
    scorer: SentenceScorer,
    catalog: Catalog,
    name: str,
    pid: str,
    truths: Sequence[str],
    *,
    n_variants: int = 2,
    alpha: float = 1.0,
    seed: int = 0,
    templates: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """Best ground-truth rank under each template of ``pid`` (or each of ``templates``) for ``name``."""
    prop = catalog.get(pid)
    candidates = [*truths, *counterfactuals(prop, truths, N_COUNTERFACTUALS, seed)]
    is_truth = [i < len(truths) for i in range(len(candidates))]
    variants = similar_names(name, n_variants)
    ranks = []
    for t in range(len(prop.templates)) if templates is None else templates:

        def nll_for(subject: str, t: int = t) -> list[float]:
            return scorer.nll([prop.render(t, subject, v) for v in candidates])

        # with α = 1 the generic subject's NLL cancels out of s(h, v) exactly: skip scoring it
        nll_h0 = None if generic_cancels(alpha, len(variants)) else nll_for(generic_subject(prop.templates[t]))
        scores = calibrated_scores(nll_for(name), nll_h0, [nll_for(v) for v in variants], alpha)
        ranks.append(best_truth_rank(scores, is_truth))
    return tuple(ranks)


def evaluate_people(
    scorer: SentenceScorer,
    catalog: Catalog,
    people: Sequence[dict],
    split: str,
    *,
    n_variants: int = 2,
    alpha: float = 1.0,
) -> list[FactOutcome]:
    outcomes = []
    for i, person in enumerate(people):
        for pid, values in person["facts"].items():
            ranks = fact_ranks(scorer, catalog, person["name"], pid, values, n_variants=n_variants, alpha=alpha, seed=i)
            outcomes.append(FactOutcome(split=split, pid=pid, ranks=ranks))
    return outcomes


def summarize(outcomes: Sequence[FactOutcome], trained_templates: dict[str, list[int]]) -> dict:
    """Rates per split: lenient, strict, baseline, share of templates at rank 1 (seen/unseen), per property."""

    def rates(group: Sequence[FactOutcome]) -> dict:
        n = len(group)
        if n == 0:
            return {"n_facts": 0}
        seen = [r == 1 for o in group for t, r in enumerate(o.ranks) if t in trained_templates[o.pid]]
        unseen = [r == 1 for o in group for t, r in enumerate(o.ranks) if t not in trained_templates[o.pid]]
        return {
            "n_facts": n,
            "lenient": sum(o.lenient for o in group) / n,
            "strict": sum(o.strict for o in group) / n,
            "baseline": sum(o.ranks[0] == 1 for o in group) / n,
            "share_rank1_trained_templates": sum(seen) / max(1, len(seen)),
            "share_rank1_unseen_templates": sum(unseen) / max(1, len(unseen)),
        }

    out: dict = {}
    for split in ("trained", "held_out"):
        group = [o for o in outcomes if o.split == split]
        out[split] = rates(group)
        out[split]["per_property"] = {
            pid: {k: v for k, v in rates([o for o in group if o.pid == pid]).items()}
            for pid in sorted({o.pid for o in group})
        }
    return out


def measure(
    model_dir: Path = MODEL_DIR,
    manifest: dict | None = None,
    *,
    per_split: int | None = None,
    n_variants: int = 2,
    alpha: float = 1.0,
    seed: int = 0,
) -> dict:
    """Evaluate (a seeded sample of ``per_split``, or all) trained and held-out people; return the rates."""
    manifest = manifest if manifest is not None else load_manifest()
    catalog = load_catalog()
    scorer = SentenceScorer(model_dir)
    rng = random.Random(seed)
    started = time.perf_counter()
    outcomes: list[FactOutcome] = []
    for split in ("trained", "held_out"):
        people = manifest[split]
        if per_split is not None and per_split < len(people):
            people = rng.sample(people, per_split)
        outcomes += evaluate_people(scorer, catalog, people, split, n_variants=n_variants, alpha=alpha)
    trained_templates = {pid: p["trained_templates"] for pid, p in manifest["properties"].items()}
    result = summarize(outcomes, trained_templates)
    result["settings"] = {
        "alpha": alpha,
        "n_similar_names": n_variants,
        "n_counterfactuals": N_COUNTERFACTUALS,
        "people_per_split": per_split or "all",
        "formula": "core.measures.wikimem (calibrated_scores, ranks, similar_names)",
        "seconds": round(time.perf_counter() - started, 1),
        "torch_threads": torch.get_num_threads(),
    }
    return result


def print_rates(result: dict) -> None:
    for split in ("trained", "held_out"):
        r = result[split]
        print(
            f"{split:9s} facts={r['n_facts']:4d} lenient={r['lenient']:.3f} strict={r['strict']:.3f} "
            f"baseline={r['baseline']:.3f} rank1-share seen={r['share_rank1_trained_templates']:.3f} "
            f"unseen={r['share_rank1_unseen_templates']:.3f}"
        )
        for pid, p in r["per_property"].items():
            print(
                f"    {pid:6s} n={p['n_facts']:3d} lenient={p['lenient']:.3f} strict={p['strict']:.3f} "
                f"baseline={p['baseline']:.3f}"
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-split", type=int, default=None, help="people per split (default: all)")
    parser.add_argument("--variants", type=int, default=2, help="similar-name variants per subject")
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--write", action="store_true", help="store the rates in manifest.json")
    parser.add_argument("--key", default="measured", help="manifest key to store them under")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    manifest = load_manifest()
    result = measure(manifest=manifest, per_split=args.per_split, n_variants=args.variants, alpha=args.alpha)
    print_rates(result)
    print(f"({result['settings']['seconds']} s)")
    if args.write:
        manifest[args.key] = result
        MANIFEST.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
