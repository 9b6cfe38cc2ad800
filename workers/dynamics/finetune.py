"""The `finetune` recipe of the dynamics audit: K fine-tuning runs of a registered model, one fold held out each.

Every run starts from the same pretrained weights, trains on the strings outside its fold (each repeated as often
as its count says) for E epochs, and scores every string after every epoch, exactly like the scratch runner
(runner.py) but one run at a time: a pretrained model is too large to batch K copies of on a CPU. Strings are
tokenized with the model's own tokenizer behind its document-start token; the EOS token, when the tokenizer has
one, ends each string and is scored. Meant for small models (the ground-truth model, SmolLM2-135M on a few
strings); the cost is K x E passes of full fine-tuning.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import torch

from app.settings import get_settings
from core.measures.dynamics import Trajectories
from workers.dynamics.runner import KFoldConfig, RunResult, assign_folds, check_inputs, split_losses
from workers.lm.base import plain_ids
from workers.lm.loading import load_model
from workers.lm.registry import hf_errors_hidden, resolve_source, resolve_spec


def _encode(loaded, texts: Sequence[str]) -> list[list[int]]:
    tok = loaded.tokenizer
    eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
    return [[loaded.document_start_id, *ids, *eos] for ids in plain_ids(tok, texts)]


def _batch(seqs: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.as_tensor(s)
        mask[i, : len(s)] = 1
    return ids, mask


def _nll(model, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed NLL per sequence of every token after the first, and the number of those tokens."""
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    scored = mask[:, 1:].float()
    return -(logp * scored).sum(1), scored.sum(1)


@torch.no_grad()
def _score(model, seqs: list[list[int]], pad: int, batch: int = 32) -> np.ndarray:
    model.eval()
    out = []
    for start in range(0, len(seqs), batch):
        nll, n = _nll(model, *_batch(seqs[start : start + batch], pad))
        out.append((nll / n).numpy())
    return np.concatenate(out)


def _train_epoch(model, opt, seqs, pool: np.ndarray, cfg: KFoldConfig, rng, pad: int) -> None:
    model.train()
    order = rng.permutation(pool)
    for chunk in np.array_split(order, max(1, math.ceil(len(order) / cfg.batch_size))):
        nll, n = _nll(model, *_batch([seqs[i] for i in chunk], pad))
        loss = nll.sum() / n.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def run_finetune(
    model_name: str,
    texts: Sequence[str],
    counts: Sequence[int],
    cfg: KFoldConfig,
    string_ids: Sequence[str] | None = None,
    on_pass: Callable[[int], None] | None = None,
) -> RunResult:
    """K x E fine-tuning passes of ``model_name``; ``on_pass(done)`` after each run's epoch (raise to cancel)."""
    settings = get_settings()
    with hf_errors_hidden(model_name):
        spec = resolve_spec(model_name, settings)
        loaded = load_model(model_name, spec, resolve_source(model_name, spec), settings)
    seqs = _encode(loaded, texts)
    limit, longest = min(cfg.context, loaded.max_length), max(len(s) for s in seqs)
    if longest > limit:
        raise ValueError(f"a string has {longest} tokens with its start and end tokens, over the context of {limit}")
    check_inputs([s[1:-1] or s[1:] for s in seqs], counts, replace(cfg, context=longest + 2))
    pad = loaded.tokenizer.pad_token_id if loaded.tokenizer.pad_token_id is not None else 0
    model = loaded.model.float()
    initial = copy.deepcopy(model.state_dict())
    folds = assign_folds(counts, cfg.folds, cfg.seed)
    rows = np.repeat(np.arange(len(seqs)), np.asarray(counts))
    run_loss = np.zeros((cfg.folds, len(seqs), cfg.epochs))
    for k in range(cfg.folds):
        torch.manual_seed(cfg.seed)
        rng = np.random.default_rng(cfg.seed + k)
        model.load_state_dict(initial)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        for e in range(cfg.epochs):
            _train_epoch(model, opt, seqs, rows[folds[rows] != k], cfg, rng, pad)
            run_loss[k, :, e] = _score(model, seqs, pad)
            if on_pass is not None:
                on_pass(k * cfg.epochs + e + 1)
    model.load_state_dict(initial)  # hand the model back as it was loaded
    model.eval()
    train, heldout = split_losses(run_loss, folds)
    ids = list(string_ids) if string_ids is not None else [str(i) for i in range(len(seqs))]
    traj = Trajectories(ids, list(range(1, cfg.epochs + 1)), train, heldout, [float(c) for c in counts])
    return RunResult(trajectories=traj, folds=[int(f) for f in folds], run_loss=run_loss)
