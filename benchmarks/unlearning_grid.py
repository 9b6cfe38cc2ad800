"""Many relearning-line variants at once, one process (one torch thread) each: the rows of docs/verification.md's
"Variants measured for the relearning line" on groundtruth-tiny or on a deeper model trained on the same people.

    python -m benchmarks.unlearning_grid --grid GRID.json --jobs 14 --out OUT.jsonl [--model-root DIR]

GRID.json: a list of {"model": "gt4" | null, "variant": {...benchmarks.unlearning --variant settings}}; "model" names
``DIR/<model>/model`` (null: groundtruth-tiny). Each finished row is appended to OUT.jsonl at once (with its
model, wall seconds and the 1-minute load average), so a run stopped at a time limit keeps what it finished.
A deeper model: ``python -c "import scripts.train_groundtruth as t; t.RECIPE['model']['n_layer'] = 4;
t.main(['--out', 'DIR/gt4/model', '--no-eval'])"`` (the same people, seeds and corpus; only the depth differs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path


def run_row(row: dict, root: Path, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.unlearning", "--variant", json.dumps(row["variant"])]
    if row.get("model"):
        cmd += ["--model", str(root / row["model"] / "model")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    t = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {**row, "error": f"timed out after {timeout:.0f} s"}
    out = {**row, "seconds": round(time.perf_counter() - t, 1), "load_average_1min": round(os.getloadavg()[0], 1)}
    if done.returncode:
        return out | {"error": done.stderr[-2000:]}
    return out | {"result": json.loads(done.stdout)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--model-root", type=Path, default=Path(".deep"))
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per row")
    args = ap.parse_args(argv)
    rows = json.loads(args.grid.read_text(encoding="utf-8"))
    with ThreadPoolExecutor(args.jobs) as pool, args.out.open("a", encoding="utf-8") as out:
        futures = [pool.submit(run_row, r, args.model_root.resolve(), args.timeout) for r in rows]
        for future in as_completed(futures):
            result = future.result()
            out.write(json.dumps(result) + "\n")
            out.flush()
            summary = (
                result["error"][-400:]
                if "error" in result
                else {k: result["result"][k] for k in ("removed", "kept", "relearned_back")}
            )
            print(result.get("model"), json.dumps(result["variant"]), summary, flush=True)


if __name__ == "__main__":
    main()
