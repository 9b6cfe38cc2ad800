"""Is the fitted tail of a null calibrated at p ≤ 0.01 and p ≤ 0.001? (core.measures.null.tail_p_value; issue 40)

    python -m benchmarks.fitted_tail                      # today's tail (top eighth) beside the top quarter
    python -m benchmarks.fitted_tail --out benchmarks/results/fitted_tail.json

Two kinds of null statistics, each split at random into a null of N facts (the tail fitted to it, as the service
does) and the facts judged against it; the share of judged facts with p ≤ 0.01 and p ≤ 0.001 is what a verdict's
false-positive rate is:

* ``knowledge_free``: the `knowledge-free` model's statistic (workers/lm/knowledge_free.py: a sentence's NLL is its
  words' 4 nats plus a uniform ±8; the calibrated score of a candidate is the mean of its two look-alikes' NLLs
  minus the subject's, the words cancelling), 20 counterfactuals, 3 templates, m = 1, 2, 3 true values: a
  near-normal, light tail;
* ``shipped``: every shape of the nulls shipped in app/nulls/shipped/ (smollm2-135m, groundtruth-tiny) with at least
  1,000 null facts (the pseudo-truth sets every full null keeps): real models' tails, heavier.

Pure computation, no model; about a minute.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
from pathlib import Path
from typing import Any

from core.measures.null import TAIL_EXCEEDANCES, TAIL_SHARE, tail_p_value

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "app" / "nulls" / "shipped"
LEVELS = (0.01, 0.001)


def p_value(null: list[float], observed: float, share: int) -> float:
    """As EmpiricalNull.p_value: empirical where TAIL_EXCEEDANCES null facts reach the observed value, else the tail."""
    k = sum(v >= observed for v in null)
    if k < TAIL_EXCEEDANCES:
        tail = tail_p_value(null, observed, share)
        if tail is not None:
            return tail
    return (1 + k) / (1 + len(null))


def knowledge_free(rng: random.Random, n: int, m: int, counterfactuals: int = 20, templates: int = 3) -> list[float]:
    out = []
    for _ in range(n):
        total = 0.0
        for _ in range(templates):
            s = [(rng.uniform(-8, 8) + rng.uniform(-8, 8)) / 2 - rng.uniform(-8, 8) for _ in range(m + counterfactuals)]
            others = s[m:]
            mean = sum(others) / len(others)
            std = statistics.pstdev(others)
            total += (max(s[:m]) - mean) / std
        out.append(total / templates)
    return out


def shipped() -> dict[str, list[float]]:
    """Every shape of the shipped nulls with at least 1,000 null facts, by model, property and shape."""
    out = {}
    for path in sorted(SHIPPED.glob("*.null.json.gz")):
        artifact = json.loads(gzip.decompress(path.read_bytes()))
        for dist in artifact["distributions"]:
            col = {c: i for i, c in enumerate(dist["columns"])}
            groups: dict[str, list[float]] = {}
            for row in dist["rows"]:
                if row[col["statistic"]] is not None:
                    shape = f"m{row[col['n_values']]}{'' if row[col['in_pool']] else '_out'}"
                    groups.setdefault(shape, []).append(row[col["statistic"]])
            model = path.name.removesuffix(".null.json.gz")
            out |= {f"{model}:{dist['property']}:{k}": v for k, v in groups.items() if len(v) >= 1000}
    return out


def rates(values: list[float], n_null: int, share: int, reps: int, judged: int, rng: random.Random) -> dict:
    hits = dict.fromkeys(LEVELS, 0)
    total = 0
    for _ in range(reps):
        drawn = rng.sample(values, min(len(values), n_null + judged))
        null, test = drawn[:n_null], drawn[n_null:]
        ps = [p_value(null, x, share) for x in test]
        for level in LEVELS:
            hits[level] += sum(p <= level for p in ps)
        total += len(ps)
    return {str(level): hits[level] / total for level in LEVELS} | {"judged": total}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--null", type=int, default=200, help="null facts the tail is fitted to (default 200)")
    args = parser.parse_args(argv)
    rng = random.Random(40)
    kf = {f"m{m}": knowledge_free(rng, 20_000, m) for m in (1, 2, 3)}
    real = shipped()
    result: dict[str, Any] = {"null_facts": args.null, "tails": {}}
    for share in (4, TAIL_SHARE):
        seeded = random.Random(share)
        row = {"knowledge_free": {k: rates(v, args.null, share, 10, 1000, seeded) for k, v in kf.items()}}
        row["shipped"] = {k: rates(v, args.null, share, 5, 800, seeded) for k, v in real.items()}
        for group in ("knowledge_free", "shipped"):
            for level in map(str, LEVELS):
                row[f"{group}_mean_{level}"] = statistics.mean(r[level] for r in row[group].values())
                row[f"{group}_max_{level}"] = max(r[level] for r in row[group].values())
        result["tails"][f"top 1/{share}"] = row
        said = {k: round(v, 5) for k, v in row.items() if "_m" in k}
        print(f"tail fitted to the top 1/{share} of {args.null} null facts: {said}", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
