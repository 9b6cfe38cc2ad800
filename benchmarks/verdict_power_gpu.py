"""Score benchmarks/verdict_power.py's missing sentences on a lent GPU machine, then fill the NLL cache with them.

On a loaded 2-core CPU the smollm2-135m run with 200 null people (~275,000 new sentences) takes hours; an H100
scores them in about a minute. The lent machine has torch and transformers but not this project's dependencies,
and carries 64 MiB a call, so:

    python -m benchmarks.verdict_power_gpu export --model smollm2-135m --null-people 200 --dir .gpu
        # (--known, --unknown, --schemes as verdict_power's: only the sentences that run needs)
        # here: every sentence the cache lacks, tokenized by the project's own scorer exactly as it scores them
        # (document start + tokens; the prefix's tokens as the shared key), as token ids (np.savez_compressed),
        # with a check sample of 2,000 sentences the cache already holds (CPU-scored); their cache keys stay here
        # (.gpu_keep/keys.npy: 64 hex digits each, too large to travel)
    python benchmarks/verdict_power_gpu.py score --dir .gpu --gguf DIR/FILE.gguf --out OUT
        # there: the same weights (the GGUF file, de-quantized by transformers as here, float32, TF32 off) and the
        # same engine (workers/lm/engine.py, prefix sharing, loaded without the service's settings), writes
        # OUT/nll.npz. transformers reads GGUF with the ``gguf`` package: where the machine lacks it (the lent H200
        # on 2026-11-27 did), carry site-packages/gguf and its gguf-*.dist-info in a folder put on PYTHONPATH
    python -m benchmarks.verdict_power_gpu import --model smollm2-135m --file OUT/nll.npz
        # here: refuses unless the check sample agrees with the CPU's NLLs (max |difference| <= 5e-3 nats; measured
        # on an H100: max 1.15e-3, mean 7.4e-5), then stores the new NLLs in the cache under their sentences' keys

The GGUF file (98 MB) travels in parts over several calls (``split``), which ``score`` joins.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
from pathlib import Path

import numpy as np

CHECK_SAMPLE = 2000
TOLERANCE = 5e-3  # nats over a whole sentence (~20 tokens, float32, different kernels): measured max 1.15e-3


def _flat(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    return np.array([t for s in seqs for t in s], dtype=np.int32), np.concatenate([[0], np.cumsum(lengths)])


def _unflat(flat: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    return [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


def export(args: argparse.Namespace) -> None:
    from benchmarks import verdict_power as vp
    from workers.lm.registry import load_scorer

    vp.MAX_COUNTERFACTUALS, vp.MAX_TEMPLATES = args.counterfactuals, args.templates
    vp.SCHEMES = tuple(args.schemes.split(","))  # only the look-alikes these schemes need
    known_cohorts, unknown_cohorts = tuple(args.known.split(",")), tuple(args.unknown.split(","))
    facts = vp.build_facts(args.model, args.null_people, args.seed, known_cohorts, None, unknown_cohorts)
    facts = [f for f in facts if f.pid in args.properties.split(",")]
    cache = vp.NllCache(args.cache, args.model)
    pairs = list({vp.NllCache.key(p): p for f in facts for p in vp.sentences(f)}.items())
    known = cache.get([p for _, p in pairs])
    todo = [(k, p) for k, p in pairs if k not in known]
    held = [(k, p) for k, p in pairs if k in known]
    check = random.Random(0).sample(held, min(CHECK_SAMPLE, len(held)))
    print(f"{len(pairs)} sentences, {len(todo)} to score, {len(check)} to check", file=sys.stderr)
    scorer = load_scorer(args.model)
    every = todo + check
    sentences = scorer.sentence_ids([a + b for _, (a, b) in every])
    distinct = sorted({a for _, (a, _) in every})
    encoded = dict(zip(distinct, scorer.encode(distinct), strict=True))
    prefixes = [[scorer.document_start_id, *encoded[a]] for _, (a, _) in every]
    args.dir.mkdir(parents=True, exist_ok=True)
    args.keys.parent.mkdir(parents=True, exist_ok=True)
    np.save(args.keys, np.array([k for k, _ in every]))
    s_flat, s_off = _flat(sentences)
    p_flat, p_off = _flat(prefixes)
    if max(s_flat.max(), p_flat.max()) < 2**16:  # smaller to carry
        s_flat, p_flat = s_flat.astype(np.uint16), p_flat.astype(np.uint16)
    np.savez_compressed(
        args.dir / "workload.npz",
        s_flat=s_flat,
        s_off=s_off,
        p_flat=p_flat,
        p_off=p_off,
        n_todo=np.array(len(todo)),
        check_nll=np.array([known[k] for k, _ in check], dtype=np.float64),
    )


def split(args: argparse.Namespace) -> None:
    data = args.file.read_bytes()
    size = -(-len(data) // args.parts)
    args.dir.mkdir(parents=True, exist_ok=True)
    for i in range(args.parts):
        (args.dir / f"part{i}").write_bytes(data[i * size : (i + 1) * size])
    print(hashlib.sha256(data).hexdigest())


def _engine_class() -> type:
    """workers.lm.engine.Engine without workers/lm/__init__.py, which imports the model registry and with it the
    service's settings (pydantic), absent on the lent machines: the engine's three modules are loaded from their
    files under their own names, beneath empty stand-in packages (no edit of the import path)."""
    import importlib.util
    import types

    lm = Path(__file__).resolve().parent.parent / "workers" / "lm"
    for name in ("workers", "workers.lm"):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = []  # a package with nothing to find on disk: only what is loaded below
            sys.modules[name] = package
    for name in ("base", "plan", "engine"):  # engine imports the other two
        spec = importlib.util.spec_from_file_location(f"workers.lm.{name}", lm / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["workers.lm.engine"].Engine


def score(args: argparse.Namespace) -> None:
    """Runs on the GPU machine: torch, transformers, gguf and workers/lm/{engine,plan,base}.py only."""
    import time

    import torch
    from transformers import AutoModelForCausalLM

    Engine = _engine_class()  # noqa: N806

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    w = np.load(args.dir / "workload.npz")
    sentences, prefixes = _unflat(w["s_flat"], w["s_off"]), _unflat(w["p_flat"], w["p_off"])
    n_todo, check = int(w["n_todo"]), w["check_nll"]
    if args.limit:  # a smoke test: the first few of each part
        keep = list(range(min(args.limit, n_todo))) + list(range(n_todo, n_todo + min(args.limit, len(check))))
        sentences, prefixes = [sentences[i] for i in keep], [prefixes[i] for i in keep]
        n_todo, check = min(args.limit, n_todo), check[: args.limit]
    device = torch.device(args.device)
    model = AutoModelForCausalLM.from_pretrained(
        str(args.gguf.parent), gguf_file=args.gguf.name, dtype=torch.float32, local_files_only=True
    )
    model = model.to(device).eval()
    started = time.monotonic()
    nll = Engine(model, device, args.batch_tokens).score(sentences, prefixes)
    seconds = time.monotonic() - started
    diff = np.abs(np.array(nll[n_todo:]) - check)
    where = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    print(
        f"{len(sentences)} sentences in {seconds:.1f} s on {where}; check sample max |GPU - CPU|"
        f" {diff.max() if len(diff) else float('nan'):.2e} nats, mean {diff.mean() if len(diff) else float('nan'):.2e}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out / "nll.npz", nll=np.array(nll, dtype=np.float64), n_todo=w["n_todo"])


def import_nll(args: argparse.Namespace) -> None:
    from benchmarks import verdict_power as vp

    got = np.load(args.file)
    w = np.load(args.dir / "workload.npz")
    n_todo = int(got["n_todo"])
    diff = np.abs(got["nll"][n_todo:] - w["check_nll"])
    print(f"check sample: {len(diff)} sentences, max |GPU - CPU| {diff.max():.2e} nats", file=sys.stderr)
    if not len(diff) or diff.max() > TOLERANCE:
        raise SystemExit(f"the GPU's NLLs differ from the CPU's by more than {TOLERANCE} nats: not imported")
    cache = vp.NllCache(args.cache, args.model)
    keys = np.load(args.keys)
    rows = [(args.model, str(k), float(v)) for k, v in zip(keys[:n_todo], got["nll"][:n_todo], strict=True)]
    cache.db.executemany("INSERT OR REPLACE INTO nll VALUES (?, ?, ?)", rows)
    cache.db.commit()
    print(f"{len(rows)} NLLs stored", file=sys.stderr)


def main() -> None:
    repo = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export")
    e.add_argument("--model", default="smollm2-135m")
    e.add_argument("--null-people", type=int, default=200)
    e.add_argument("--counterfactuals", type=int, default=20)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--known", default="famous", help="as verdict_power's --known")
    e.add_argument("--unknown", default="fictitious", help="as verdict_power's --unknown")
    e.add_argument("--schemes", default="reversed,same_origin,both,none", help="as verdict_power's --schemes")
    e.add_argument("--properties", default="P106,P27,P19,P21,P1412", help="as verdict_power's --properties")
    e.add_argument("--templates", type=int, default=3, help="as verdict_power's --templates")
    e.add_argument("--cache", type=Path, default=repo / "var" / "verdict_power_nll.sqlite3")
    e.add_argument("--dir", type=Path, default=repo / ".gpu")
    e.add_argument("--keys", type=Path, default=repo / ".gpu_keep" / "keys.npy")
    p = sub.add_parser("split")
    p.add_argument("--file", type=Path, required=True)
    p.add_argument("--parts", type=int, default=3)
    p.add_argument("--dir", type=Path, default=repo / ".gpu")
    s = sub.add_parser("score")
    s.add_argument("--dir", type=Path, default=repo / ".gpu")
    s.add_argument("--gguf", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--batch-tokens", type=int, default=16384)
    s.add_argument("--device", default="cuda")
    s.add_argument("--limit", type=int, default=0)
    i = sub.add_parser("import")
    i.add_argument("--model", default="smollm2-135m")
    i.add_argument("--file", type=Path, required=True)
    i.add_argument("--dir", type=Path, default=repo / ".gpu")
    i.add_argument("--cache", type=Path, default=repo / "var" / "verdict_power_nll.sqlite3")
    i.add_argument("--keys", type=Path, default=repo / ".gpu_keep" / "keys.npy")
    args = ap.parse_args()
    {"export": export, "split": split, "score": score, "import": import_nll}[args.command](args)


if __name__ == "__main__":
    main()
