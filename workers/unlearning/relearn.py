"""Relearning: a few steps of ordinary fine-tuning on given texts — other facts of a forgotten person, or nearby
text — the attack that shows an unlearning was shallow (the facts come back though none of them was in the texts:
RepSelect; Hu et al. 2024, "Unlearning or obfuscating?"). Full batch, Adam, the causal-LM loss on every token of
each text (the document-start token prepended, as the model was trained). Defaults measured on ``groundtruth-tiny``
(benchmarks/unlearning.py; docs/verification.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from workers.unlearning.tuning import (
    TargetText,
    adam,
    batch,
    load,
    save,
    subject_token_ids,
    target_logprob,
    train_embeddings_only,
)

SCOPES = ("all", "embeddings", "subject")
STEPS = 20
LR = 1e-3
SUBJECT_LR = 3e-2  # scope "subject": a few embedding rows, moved as far as the reference unlearning moved them


def default_lr(scope: str) -> float:
    """The learning rate a relearning of ``scope`` runs at unless told: ``SUBJECT_LR`` for ``subject``, else ``LR``."""
    return SUBJECT_LR if scope == "subject" else LR


def relearn(
    source: Path,
    texts: list[str],
    out: Path,
    *,
    steps: int = STEPS,
    lr: float | None = None,
    seed: int = 0,
    scope: str = "all",
    subjects: Sequence[str] = (),
) -> Path:
    """Fine-tune the model directory ``source`` for ``steps`` steps on ``texts``; write it to ``out``. ``scope``:
    ``all`` weights, ``embeddings`` (the input embeddings only), or ``subject``: only the input-embedding rows of
    the ``subjects``' name tokens (the weights the reference unlearning moves). ``lr``: by default ``LR``, and
    ``SUBJECT_LR`` for scope ``subject``."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}")
    if steps < 1:
        raise ValueError("steps must be at least 1")
    lr = default_lr(scope) if lr is None else lr
    if lr <= 0:
        raise ValueError("lr must be positive")
    if scope == "subject" and not any(isinstance(x, str) and x.strip() for x in subjects):
        raise ValueError("scope 'subject' needs the subjects whose name tokens are fine-tuned")
    texts = [t for t in texts if isinstance(t, str) and t.strip()]
    if not texts:
        raise ValueError("texts must hold at least one non-empty text to fine-tune on")
    source, out = Path(source), Path(out)
    torch.manual_seed(seed)
    model, tokenizer = load(source)
    b = batch(tokenizer, [TargetText("", t) for t in texts])
    if scope == "embeddings":
        train_embeddings_only(model)
    elif scope == "subject":
        train_embeddings_only(model, subject_token_ids(tokenizer, [x for x in subjects if isinstance(x, str) and x]))
    n_target = b.target.sum(1).clamp(min=1)
    model.train()
    opt = adam(model, lr)
    for _ in range(steps):
        loss = -(target_logprob(model, b) / n_target).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return save(
        model, tokenizer, source, out, {"method": "relearn", "scope": scope, "steps": steps, "lr": lr, "seed": seed}
    )
