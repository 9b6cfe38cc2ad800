"""The fast exact scoring engine: run each shared token prefix once, then only the continuations.

For a sentence x = key + tail (key = shared prefix, document start first):
    NLL(x) = NLL(key[1:] | key[0]) + [-log p(tail[0] | key)] + sum_{i>=1} -log p(tail[i] | key, tail[:i]).
The first two terms come from ONE forward pass over the key (its KV cache is kept); the last runs only tail[:-1]
through the model, attending to the key's cached keys/values -- so a candidate value of one token plus a full stop
costs one token position instead of a whole sentence. LM-head logits are computed only at scored positions and
normalised in fp32. Two ways to run the continuations (``mode``):
  "expand": one batch row per sentence; the key's KV rows are gathered per row (tiny attention, some copying).
  "packed": all continuations of a batch in ONE row after the keys they need, with a 4-D mask (no KV copies, but
            attention grows with the square of the pack length).
Both are exact up to float reordering. Measured side by side (benchmarks/scoring.py) they are within noise of each
other on this CPU once expand batches hold one length each; packed is the default (less memory: no KV copies).
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import torch
from transformers import DynamicCache

from workers.lm.base import ProgressCallback
from workers.lm.plan import batch_rows, chunk_groups, make_plan, pack_rows

Mode = Literal["expand", "packed"]
LOGITS_BUDGET_BYTES = 256 * 2**20  # fp32 logits (+ slack), per forward pass, on a CPU
GPU_LOGITS_BUDGET_BYTES = 2 * 2**30  # on CUDA: 5,461 scored positions of a 49,152-token vocabulary (docs/engine.md)
MAX_GROUPS_PER_CHUNK = 256  # bounds the prefix KV kept alive while its continuations run
SOFTMAX_ROWS = 8  # rows normalised together at least
SOFTMAX_BLOCK_BYTES = 8 * 49_152 * 4  # ... and as many as fit in this: 8 rows of a 49,152-token vocabulary (fp32)


@dataclass
class PrefixState:
    """Result of the prefix pass over one chunk of keys (right-padded to the longest)."""

    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values): (G, kv_heads, K, head_dim)
    key_len: torch.Tensor  # (G,)
    nll: torch.Tensor  # (G,) float64: NLL of key[1:] given key[0]
    first: torch.Tensor  # (R,) float64: -log p(first tail token | key) for each requested (group, token)


class ScoringProgress:
    """Counts the INPUT sentences whose distinct sentence is fully scored (a duplicate input is finished with its
    twin) and hands the running count to ``callback`` after each piece of work."""

    def __init__(self, sentence_of: Sequence[int], callback: ProgressCallback | None) -> None:
        self.weight = Counter(sentence_of)
        self.callback = callback
        self.done = 0

    def finish(self, distinct: Iterable[int]) -> None:
        if self.callback is None:
            return
        self.done += sum(self.weight[s] for s in distinct)
        self.callback(self.done)


class Engine:
    """Exact prefix-sharing scorer over a transformers causal LM. Inputs are token ids (document start first)."""

    def __init__(
        self, model: Any, device: torch.device, batch_tokens: int, mode: Mode = "packed", pack_tokens: int = 256
    ) -> None:
        self.model = model
        # Attention in a pack grows with its square: keep packs moderate. Each pack is one progress report, too:
        # 256 reports every ~170 WikiMem sentences (~1 s on a quiet 2-core CPU, 512 took ~2 s). Throughput of
        # 128/256/512 measured within noise of each other (smollm2-135m, 768 sentences, 2 interleaved rounds, one
        # thread, machine at load 13: 36.3/35.8/35.4 sentences/s).
        self.pack_tokens = pack_tokens
        self.device = device
        self.mode: Mode = mode
        vocab = model.get_output_embeddings().weight.shape[0]
        budget = GPU_LOGITS_BUDGET_BYTES if device.type == "cuda" else LOGITS_BUDGET_BYTES
        self.max_rows = max(16, budget // (vocab * 4 * 2))  # scored positions per pass
        self.batch_tokens = max(1, batch_tokens)  # token positions per forward pass

    @torch.inference_mode()
    def score(
        self,
        sentences: Sequence[Sequence[int]],
        prefixes: Sequence[Sequence[int]],
        *,
        on_progress: ProgressCallback | None = None,
    ) -> list[float]:
        """NLL of each sentence. ``on_progress`` gets the number of input sentences finished after the prefix pass
        and after every continuation batch (a few hundred tokens each), not once per call."""
        plan = make_plan(sentences, prefixes)
        progress = ScoringProgress(plan.sentence_of, on_progress)
        totals = torch.zeros(len(plan.tails), dtype=torch.float64)
        members: list[list[int]] = [[] for _ in plan.keys]
        for s, g in enumerate(plan.group_of):
            members[g].append(s)
        budget = min(self.batch_tokens, self.max_rows)
        for chunk in chunk_groups([len(k) for k in plan.keys], budget, MAX_GROUPS_PER_CHUNK):
            rows = [s for g in chunk for s in members[g]]
            local = {g: i for i, g in enumerate(chunk)}
            values = self._score_chunk(
                [plan.keys[g] for g in chunk],
                [local[plan.group_of[s]] for s in rows],
                [plan.tails[s] for s in rows],
                lambda done, rows=rows: progress.finish(rows[r] for r in done),
            )
            totals[torch.as_tensor(rows)] = values.cpu()
        return [float(totals[s]) for s in plan.sentence_of]

    def _score_chunk(
        self, keys: list[list[int]], owner: list[int], tails: list[list[int]], finished: Callable[[list[int]], None]
    ) -> torch.Tensor:
        requests = [(owner[r], tail[0]) for r, tail in enumerate(tails) if tail]
        state = self._prefix_pass(keys, requests)
        totals = state.nll[torch.as_tensor(owner, device=self.device)].clone()
        has_tail = torch.as_tensor([bool(t) for t in tails], device=self.device)
        totals[has_tail] += state.first
        long_rows = [r for r, tail in enumerate(tails) if len(tail) >= 2]
        finished([r for r, tail in enumerate(tails) if len(tail) < 2])  # the prefix pass scored these whole
        lengths = [len(tails[r]) - 1 for r in long_rows]
        budget = min(self.batch_tokens, self.max_rows)
        if self.mode == "expand":
            # every row is padded to the batch's longest: one length per batch computes no padding (40% here)
            batches, run = batch_rows(lengths, budget, uniform=True), self._continue_expand
        else:
            batches, run = pack_rows(lengths, min(budget, self.pack_tokens)), self._continue_packed
        for batch in batches:
            rows = [long_rows[i] for i in batch]
            totals[torch.as_tensor(rows, device=self.device)] += run(
                state, [owner[r] for r in rows], [tails[r] for r in rows]
            )
            finished(rows)
        return totals

    def _prefix_pass(self, keys: list[list[int]], requests: list[tuple[int, int]]) -> PrefixState:
        width = max(len(k) for k in keys)
        ids = torch.zeros((len(keys), width), dtype=torch.long)
        for g, key in enumerate(keys):
            ids[g, : len(key)] = torch.as_tensor(key)
        key_len = torch.as_tensor([len(k) for k in keys])
        valid = torch.arange(width)[None, :] < key_len[:, None]
        ids, valid, key_len = ids.to(self.device), valid.to(self.device), key_len.to(self.device)
        cache = DynamicCache(config=self.model.config)
        logits, out = forward_at(  # rows: (g, t) for valid t, row-major
            self.model,
            valid,
            input_ids=ids,
            attention_mask=valid.long(),
            use_cache=True,
            **with_cache(self.model, cache),
        )
        start = torch.cumsum(key_len, 0) - key_len
        # positions t < len-1 predict key[t+1]; position len-1 predicts each requested first tail token
        inner = valid.clone()
        inner[torch.arange(len(keys), device=self.device), key_len - 1] = False
        inner_rows = (start[:, None] + torch.arange(width, device=self.device)[None, :])[inner]
        inner_targets = ids[:, 1:][inner[:, :-1]]
        inner_group = torch.arange(len(keys), device=self.device)[:, None].expand_as(inner)[inner]
        req_group = torch.as_tensor([g for g, _ in requests], dtype=torch.long, device=self.device)
        req_rows = start[req_group] + key_len[req_group] - 1
        req_targets = torch.as_tensor([t for _, t in requests], dtype=torch.long, device=self.device)
        picked = pick_nll(logits, torch.cat([inner_rows, req_rows]), torch.cat([inner_targets, req_targets]))
        nll = torch.zeros(len(keys), dtype=torch.float64, device=self.device)
        nll.index_add_(0, inner_group, picked[: len(inner_rows)])
        kv = [(layer.keys, layer.values) for layer in returned_cache(out).layers]
        return PrefixState(kv=kv, key_len=key_len, nll=nll, first=picked[len(inner_rows) :])

    def _continue_expand(self, state: PrefixState, owner: list[int], tails: list[list[int]]) -> torch.Tensor:
        """One row per sentence: inputs tail[:-1] after its key's KV rows (gathered), predicting tail[1:]."""
        group = torch.as_tensor(owner, device=self.device)
        klen = state.key_len[group]
        kmax = int(klen.max())
        ids, valid, targets = pad_tails(tails, self.device)
        m = ids.shape[1]
        past = [(k[:, :, :kmax].index_select(0, group), v[:, :, :kmax].index_select(0, group)) for k, v in state.kv]
        cache = prefilled_cache(self.model.config, past)
        prefix_ok = torch.arange(kmax, device=self.device)[None, :] < klen[:, None]  # (B, kmax)
        causal = torch.ones((m, m), dtype=torch.bool, device=self.device).tril()
        # pad queries also see their prefix: a fully masked row would produce NaN hidden states
        allowed = torch.cat([prefix_ok[:, None, :].expand(-1, m, -1), causal[None].expand(len(tails), -1, -1)], 2)
        positions = klen[:, None] + torch.arange(m, device=self.device)[None, :]
        logits, _ = forward_at(
            self.model,
            valid,
            input_ids=ids,
            attention_mask=additive_mask(allowed[:, None], self.model.dtype),
            position_ids=positions,
            use_cache=True,
            **with_cache(self.model, cache),
        )
        rows = torch.arange(len(tails), device=self.device)[:, None].expand_as(valid)[valid]
        picked = pick_nll(logits, torch.arange(len(logits), device=self.device), targets[valid])
        return torch.zeros(len(tails), dtype=torch.float64, device=self.device).index_add_(0, rows, picked)

    def _continue_packed(self, state: PrefixState, owner: list[int], tails: list[list[int]]) -> torch.Tensor:
        """All continuations in one row after the keys they need; a 4-D mask keeps each sentence to its own key."""
        dev = self.device
        groups = sorted(set(owner))
        gsel = torch.as_tensor(groups, device=dev)
        glen = state.key_len[gsel]
        kmax = int(glen.max())
        span = torch.arange(kmax, device=dev)[None, :]
        inside = span < glen[:, None]
        g_idx, p_idx = gsel[:, None].expand(-1, kmax)[inside], span.expand(len(groups), -1)[inside]
        past = [(pack_kv(k, g_idx, p_idx), pack_kv(v, g_idx, p_idx)) for k, v in state.kv]
        key_owner = gsel.repeat_interleave(glen)  # (P,)
        lengths = torch.as_tensor([len(t) - 1 for t in tails], device=dev)
        q_sent = torch.arange(len(tails), device=dev).repeat_interleave(lengths)  # (Q,)
        q_step = torch.cat([torch.arange(n, device=dev) for n in lengths.tolist()])
        q_group = torch.as_tensor(owner, device=dev)[q_sent]
        ids = torch.as_tensor([tok for t in tails for tok in t[:-1]], device=dev)[None]
        targets = torch.as_tensor([tok for t in tails for tok in t[1:]], device=dev)
        see_key = q_group[:, None] == key_owner[None, :]
        see_tail = (q_sent[:, None] == q_sent[None, :]) & (q_step[None, :] <= q_step[:, None])
        allowed = torch.cat([see_key, see_tail], 1)[None, None]
        positions = (state.key_len[q_group] + q_step)[None]
        cache = prefilled_cache(self.model.config, past)
        out = self.model(
            input_ids=ids,
            attention_mask=additive_mask(allowed, self.model.dtype),
            position_ids=positions,
            use_cache=True,
            **with_cache(self.model, cache),
        )
        logits = out.logits.reshape(-1, out.logits.shape[-1])
        picked = pick_nll(logits, torch.arange(len(logits), device=dev), targets)
        return torch.zeros(len(tails), dtype=torch.float64, device=dev).index_add_(0, q_sent, picked)


def pick_nll(logits: torch.Tensor, rows: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-log softmax(logits[rows])[targets], float64 out (for summing). The normaliser is always computed in fp32:
    half-precision normalisers are off by ~1e-2 nats. log_softmax runs over a block of rows at a time that stays in
    the CPU's cache (SOFTMAX_BLOCK_BYTES, at least SOFTMAX_ROWS rows): ~9x faster on CPU than one pass over the whole
    (N, vocab) matrix for a 49,152-token vocabulary; for a small one (groundtruth-tiny's 1,024) a block holds hundreds
    of rows, not 8, and the loop's Python is paid once per pack instead of every 8 rows. Each row is normalised on
    its own, so the block size never changes a value (docs/lab/2026-11-29-engine-overheads.md)."""
    out = torch.empty(len(rows), dtype=torch.float64, device=logits.device)
    step = max(SOFTMAX_ROWS, SOFTMAX_BLOCK_BYTES // (logits.shape[-1] * 4))
    order = torch.argsort(rows)
    bounds = torch.searchsorted(rows[order], torch.arange(0, len(logits) + step, step, device=rows.device)).tolist()
    for chunk, start in enumerate(range(0, len(logits), step)):
        lo, hi = bounds[chunk], bounds[chunk + 1]
        if lo == hi:
            continue
        sel = order[lo:hi]
        logp = torch.log_softmax(logits[start : start + step].float(), dim=-1)
        out[sel] = -logp[rows[sel] - start, targets[sel]].double()
    return out


def with_cache(model: Any, cache: Any) -> dict[str, Any]:
    """The keyword that hands a KV cache to ``model``'s forward: ``cache`` where its forward takes it (transformers
    5.24 renamed ``past_key_values``, and warns on every process's first use of the old name), else the old one."""
    return {_cache_keyword(type(model)): cache}


@lru_cache
def _cache_keyword(model_type: type) -> str:
    return "cache" if "cache" in inspect.signature(model_type.forward).parameters else "past_key_values"


@lru_cache
def keep_mode(model_type: type) -> str:
    """How this transformers version computes logits only at chosen positions of a forward pass:
    "mask": ``logits_to_keep`` takes a 2-D boolean mask (transformers >= 5.2x, ``slice_logits_to_keep``);
    "columns": it takes a 1-D tensor of positions, the same for every row (older 4.5x-5.1x releases);
    "all": the forward has no such argument: every position's logits are computed, then selected.
    All three give the same rows; the older ways cost LM-head work at padded positions (measured on a GPU with
    transformers 5.17, docs/engine.md)."""
    if "logits_to_keep" not in inspect.signature(model_type.forward).parameters:
        return "all"
    try:
        from transformers.modeling_utils import slice_logits_to_keep

        if slice_logits_to_keep(torch.zeros(1, 2, 1), torch.tensor([[False, True]])).shape == (1, 1):
            return "mask"
    except (ImportError, RuntimeError, IndexError, TypeError):
        pass
    return "columns"


def forward_at(model: Any, keep: torch.Tensor, **inputs: Any) -> tuple[torch.Tensor, Any]:
    """Run ``model`` and return (logits at the True positions of ``keep`` (B, L) as (N, V) rows in row-major order,
    the model's output), whichever way this transformers version selects positions (see ``keep_mode``)."""
    mode = keep_mode(type(model))
    if mode == "mask":
        out = model(**inputs, logits_to_keep=keep)
        return out.logits.reshape(-1, out.logits.shape[-1]), out
    if mode == "columns":
        columns = keep.any(0).nonzero().flatten()
        out = model(**inputs, logits_to_keep=columns)
        return out.logits[keep[:, columns]], out
    out = model(**inputs)
    return out.logits[keep], out


def returned_cache(out: Any) -> Any:
    """The KV cache a forward returned, under either name (see ``with_cache``)."""
    # (not out.get("cache", out.past_key_values): reading the old name warns, and a default is evaluated first)
    return out["cache"] if "cache" in out else out.past_key_values  # noqa: SIM401


def prefilled_cache(config: Any, past: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    """A DynamicCache holding ``past`` without copying it (the documented ``ddp_cache_data`` path concatenates onto
    an empty tensor: one more copy of every row's prefix KV per layer)."""
    cache = DynamicCache(config=config)
    if len(cache.layers) != len(past):
        return DynamicCache(ddp_cache_data=past, config=config)
    for layer, (keys, values) in zip(cache.layers, past, strict=True):
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values
    return cache


def pad_tails(tails: list[list[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inputs tail[:-1] and targets tail[1:], right-padded: (B, m) ids, (B, m) valid, (B, m) targets."""
    m = max(len(t) - 1 for t in tails)
    ids = torch.zeros((len(tails), m), dtype=torch.long)
    targets = torch.zeros((len(tails), m), dtype=torch.long)
    valid = torch.zeros((len(tails), m), dtype=torch.bool)
    for r, tail in enumerate(tails):
        n = len(tail) - 1
        ids[r, :n] = torch.as_tensor(tail[:-1])
        targets[r, :n] = torch.as_tensor(tail[1:])
        valid[r, :n] = True
    return ids.to(device), valid.to(device), targets.to(device)


def pack_kv(t: torch.Tensor, g_idx: torch.Tensor, p_idx: torch.Tensor) -> torch.Tensor:
    """(G, H, K, D) -> (1, H, P, D): positions p_idx of keys g_idx, one after another (copies only those)."""
    return t[g_idx, :, p_idx].permute(1, 0, 2)[None]


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Boolean (B, 1, Q, K) -> additive float mask; the most negative finite value, not -inf, so no NaN can appear."""
    zero = torch.zeros((), dtype=dtype, device=allowed.device)
    return torch.where(allowed, zero, torch.finfo(dtype).min)
