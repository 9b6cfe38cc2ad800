"""Torch threads per worker process on CPU: the same scoring work with 1, 2 and torch's default thread count, side
by side in one run (interleaved rounds, so a change of load hits every setting alike), on the shipped engine.

    python -m benchmarks.torch_threads --model smollm2-135m --sentences 300 --rounds 3

Reports sentences per second per setting (median over rounds) and the 1-minute load average. The service's default
(`MEMAUDIT_TORCH_THREADS`, app/settings.py) is the setting measured fastest here; docs/engine.md has the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def sentences(n: int) -> list[tuple[str, str]]:
    from core.catalog import load_catalog

    catalog = load_catalog()
    out = []
    for prop in catalog:
        for value in prop.pool:
            out.append(prop.split(0, f"Person {len(out)}", value))
            if len(out) == n:
                return out
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--sentences", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    import torch

    from workers.lm.registry import load_scorer

    default_threads = torch.get_num_threads()
    scorer = load_scorer(args.model)
    work = sentences(args.sentences)
    settings = {"1": 1, "2": 2, f"default ({default_threads})": default_threads}
    rates: dict[str, list[float]] = {k: [] for k in settings}
    loads = []
    for _ in range(args.rounds):
        for label, threads in settings.items():
            torch.set_num_threads(threads)
            loads.append(os.getloadavg()[0])
            started = time.perf_counter()
            scorer.score(work)
            rates[label].append(len(work) / (time.perf_counter() - started))
    result = {
        "model": args.model,
        "sentences": len(work),
        "rounds": args.rounds,
        "load_average_1min": [round(min(loads), 1), round(max(loads), 1)],
        "sentences_per_second": {k: round(statistics.median(v), 1) for k, v in rates.items()},
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
