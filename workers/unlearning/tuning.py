"""What unlearning and relearning share: load a transformers causal-LM directory, tokenize (prefix, target) texts
into one padded batch with a mask over the target's tokens, per-example log-likelihoods, and save a loadable
directory (config, weights, tokenizer) with a note of what was done to it.

Sentences are scored as the service's scorers score them: the tokenizer's document-start token (id 0 on
``groundtruth-tiny`` and ``smollm2-135m``) prepended, the tokenizer adding nothing itself.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

NOTE = "memaudit_unlearning.json"  # what was done to the weights (counts and settings only: no text of a record)
MAX_EXAMPLES = 10_000  # a bound on one run's texts (a forget set of 10 people is ~150)


@dataclass(frozen=True)
class TargetText:
    """One text to fit or to forget: ``prefix + target + suffix``, of which only ``target``'s tokens are fitted or
    forgotten (``prefix`` and ``suffix`` are context); ``subject`` names whom the text is about ("" if unknown)."""

    prefix: str
    target: str
    suffix: str = ""
    subject: str = ""


@dataclass(frozen=True)
class TokenBatch:
    ids: torch.Tensor  # (N, S) with the document-start token first
    attention: torch.Tensor  # (N, S)
    target: torch.Tensor  # (N, S - 1) 1 where token j + 1 is a target token (predicted at position j)


def load(source: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    return model, tokenizer


def batch(tokenizer: PreTrainedTokenizerBase, examples: Sequence[TargetText]) -> TokenBatch:
    """One padded batch; a token is a target when its characters overlap the target's (a byte-level BPE token
    carries the space before a word, so the value's first token starts inside the prefix's trailing space)."""
    if not examples:
        raise ValueError("nothing to train on: no example")
    if len(examples) > MAX_EXAMPLES:
        raise ValueError(f"too many texts for one run: at most {MAX_EXAMPLES}")
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else start
    rows: list[tuple[list[int], list[int]]] = []
    for ex in examples:
        text = ex.prefix + ex.target + ex.suffix
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = [start, *enc["input_ids"]]
        lo, hi = len(ex.prefix), len(ex.prefix) + len(ex.target)
        is_target = [0, *(1 if end > lo and begin < hi else 0 for begin, end in enc["offset_mapping"])]
        rows.append((ids, is_target))
    width = max(len(ids) for ids, _ in rows)
    ids_t = torch.full((len(rows), width), pad, dtype=torch.long)
    att = torch.zeros((len(rows), width), dtype=torch.long)
    tgt = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, (ids, is_target) in enumerate(rows):
        ids_t[i, : len(ids)] = torch.tensor(ids)
        att[i, : len(ids)] = 1
        tgt[i, : len(ids)] = torch.tensor(is_target, dtype=torch.float32)
    return TokenBatch(ids=ids_t, attention=att, target=tgt[:, 1:])


def target_logprob(model: PreTrainedModel, b: TokenBatch) -> torch.Tensor:
    """(N,) summed log-probability of each example's target tokens."""
    logits = model(input_ids=b.ids, attention_mask=b.attention).logits[:, :-1].float()
    logp = torch.log_softmax(logits, -1).gather(2, b.ids[:, 1:, None])[:, :, 0]
    return (logp * b.target).sum(1)


def save(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, source: Path, out: Path, note: dict[str, Any]
) -> Path:
    """Write ``out`` as a loadable model directory and the note of what was done (with the source's name)."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if (source / "generation_config.json").exists() and not (out / "generation_config.json").exists():
        shutil.copy2(source / "generation_config.json", out / "generation_config.json")
    (out / NOTE).write_text(json.dumps({"source": source.name, **note}, indent=2) + "\n", encoding="utf-8")
    return out


def subject_token_ids(tokenizer: PreTrainedTokenizerBase, subjects: Iterable[str]) -> list[int]:
    """The token ids of the subjects' names, alone and after a space (a byte-level BPE spells a word differently
    at the start of a text and inside it)."""
    ids: set[int] = set()
    for subject in subjects:
        for spelling in (subject, " " + subject):
            ids.update(tokenizer(spelling, add_special_tokens=False)["input_ids"])
    return sorted(ids)


def adam(model: PreTrainedModel, lr: float) -> torch.optim.Optimizer:
    return torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)


def train_embeddings_only(model: PreTrainedModel, rows: Sequence[int] | None = None) -> None:
    """Freeze every weight but the input embeddings; with ``rows``, only those rows move (the gradient is masked)."""
    embedding = model.get_input_embeddings().weight
    for p in model.parameters():
        p.requires_grad_(p is embedding)
    if rows is not None:
        mask = torch.zeros(embedding.shape[0], 1)
        mask[list(rows)] = 1.0
        embedding.register_hook(lambda grad: grad * mask)
