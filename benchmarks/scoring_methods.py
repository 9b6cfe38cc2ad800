"""The methods benchmarks/scoring.py compares -- the real peers, the engine's variants and its NLL cache -- and how
they are measured: wall and CPU time, peak RSS, counted work.

Peers (the ``bench`` extra: ``pip install -e '.[bench]'``), all on the engine's own model object (same weights, same
dtype) with a copy of its tokenizer (the peers change its padding settings), all conditioned on the engine's
document-start token so that every method returns the same number, -sum log p(token) over every token of the
sentence given that one token:
  - lm-evaluation-harness: ``HFLM.loglikelihood`` on ``("", sentence)`` requests with ``prefix_token_id`` = the
    document start (an empty context is replaced by that one token); optionally behind lm-eval's own ``CachingLM``
    (a SQLite file keyed by the request) for the warm comparison;
  - minicons: ``scorer.IncrementalLMScorer.sequence_score`` with a summing reduction, on the document start's text +
    the sentence (minicons never scores a sequence's first token: the document start becomes the condition);
  - one sentence per forward pass: plain transformers, log-softmax over the vocabulary at every position.
Each peer checks at construction that it feeds the model exactly the engine's token ids.
"""

from __future__ import annotations

import copy
import resource
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from workers.lm.engine import Engine
from workers.lm.hf import CPU_PACK_TOKENS

INSTALL_HINT = "the real peers need the bench extra: pip install -e '.[bench]' (lm-eval, minicons)"


class LmEval:
    """lm-evaluation-harness's HFLM, scoring whole sentences given the document start."""

    def __init__(self, scorer: Any, batch_size: int) -> None:
        try:
            from lm_eval.models.huggingface import HFLM
        except ImportError as exc:
            raise SystemExit(INSTALL_HINT) from exc
        self.lm = HFLM(
            pretrained=scorer.model,
            tokenizer=copy.deepcopy(scorer.tokenizer),
            backend="causal",
            batch_size=batch_size,
            device=str(scorer.device),
            prefix_token_id=scorer.document_start_id,
            max_length=scorer.max_length,
        )
        probe = "Barack Obama's occupation is software engineer."
        ctx = [self.lm.prefix_token_id]
        fed = ctx + self.lm.tok_encode(probe, add_special_tokens=False)
        check_ids("lm-eval", fed, scorer.sentence_ids([probe])[0])

    @staticmethod
    def requests(sentences: Sequence[str]) -> list[Any]:
        from lm_eval.api.instance import Instance

        return [Instance("loglikelihood", {}, ("", text), i) for i, text in enumerate(sentences)]

    def score(self, sentences: Sequence[str]) -> list[float]:
        return [-logp for logp, _ in self.lm.loglikelihood(self.requests(sentences), disable_tqdm=True)]


class CachedLmEval:
    """lm-eval behind its CachingLM. Each trial gets a fresh copy of a SQLite file pre-filled with the
    generic-subject sentences, as the engine's warm trial gets an NLL cache holding them. It has its own HFLM:
    CachingLM installs a hook on the wrapped model that writes every result to the file."""

    def __init__(self, scorer: Any, batch_size: int, directory: Path) -> None:
        self.inner = LmEval(scorer, batch_size)
        plain = self.inner.lm.loglikelihood  # CachingLM calls it without disable_tqdm: a progress bar per call
        self.inner.lm.loglikelihood = lambda requests, disable_tqdm=True: plain(requests, disable_tqdm=disable_tqdm)
        self.directory = directory
        self.template = directory / "prefilled.sqlite"
        self.trials = 0

    def _open(self, path: Path) -> Any:
        from lm_eval.api.model import CachingLM

        return CachingLM(self.inner.lm, str(path))

    def prefill(self, sentences: Sequence[str]) -> None:
        cache = self._open(self.template)
        cache.loglikelihood(self.inner.requests(sentences))
        cache.dbdict.close()

    def fresh(self) -> Path:
        self.trials += 1
        path = self.directory / f"trial{self.trials}.sqlite"
        shutil.copyfile(self.template, path)
        return path

    def score(self, path: Path, sentences: Sequence[str]) -> list[float]:
        cache = self._open(path)
        try:
            return [-logp for logp, _ in cache.loglikelihood(self.inner.requests(sentences))]
        finally:
            cache.dbdict.close()


class Minicons:
    """minicons' IncrementalLMScorer: summed log-probs of every token after the first (the document start)."""

    def __init__(self, scorer: Any, batch_size: int) -> None:
        try:
            from minicons import scorer as minicons_scorer
        except ImportError as exc:
            raise SystemExit(INSTALL_HINT) from exc
        self.lm = minicons_scorer.IncrementalLMScorer(
            scorer.model, device=str(scorer.device), tokenizer=copy.deepcopy(scorer.tokenizer)
        )
        self.start = scorer.tokenizer.decode([scorer.document_start_id])
        self.batch_size = batch_size
        probe = "Barack Obama's occupation is software engineer."
        fed = self.lm.encode([self.start + probe])["input_ids"][0].tolist()
        check_ids("minicons", fed, scorer.sentence_ids([probe])[0])

    def score(self, sentences: Sequence[str]) -> list[float]:
        result: list[float] = []
        for start in range(0, len(sentences), self.batch_size):
            batch = [self.start + text for text in sentences[start : start + self.batch_size]]
            result += [-value for value in self.lm.sequence_score(batch, reduction=lambda x: x.sum(0).item())]
        return result


def check_ids(peer: str, fed: list[int], engine: list[int]) -> None:
    if fed != engine:
        raise SystemExit(f"{peer} would score other token ids than the engine ({fed} vs {engine}): not comparable")


@torch.inference_mode()
def one_per_pass(model: torch.nn.Module, seqs: Sequence[Sequence[int]]) -> list[float]:
    """One sentence per forward pass, log-softmax over the vocabulary at every position."""
    result = []
    for seq in seqs:
        ids = torch.tensor([seq])
        logp = torch.log_softmax(model(ids).logits.float(), dim=-1)
        result.append(float(-logp[0, :-1].gather(1, ids[0, 1:, None]).sum()))
    return result


# -- the engine -----------------------------------------------------------------------------------------------
class NllCache:
    """Emulates the service's NLL table: (fingerprint, exact sentence) -> NLL; only misses reach the model."""

    def __init__(self, scorer: Any, store: dict[tuple[str, str], float]) -> None:
        self.scorer = scorer
        self.store = dict(store)

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        keys = [(self.scorer.fingerprint, p + c) for p, c in pairs]
        missing: dict[tuple[str, str], tuple[str, str]] = {}
        for key, pair in zip(keys, pairs, strict=True):
            if key not in self.store and key not in missing:
                missing[key] = pair
        if missing:
            self.store.update(zip(missing, self.scorer.score(list(missing.values())), strict=True))
        return [self.store[key] for key in keys]


def engine_variants(scorer: Any, modes: Sequence[str], pack_tokens: Sequence[int]) -> dict[str, Engine]:
    """Engines by name; the first is the default (modes[0] with pack_tokens[0]), the others are compared with it."""
    variants: dict[str, Engine] = {}
    for mode in modes:
        for pack in pack_tokens if mode == "packed" else [0]:
            name = f"engine {mode}/{pack}" if mode == "packed" else "engine expand"
            variants[name] = Engine(scorer.model, scorer.device, scorer.batch_tokens, mode, pack or CPU_PACK_TOKENS)  # type: ignore[arg-type]
    return variants


# -- timing ----------------------------------------------------------------------------------------------------
def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 2**20


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float, float]:
    """fn's result, its wall time, the process's CPU time meanwhile, and the peak RSS (MB) sampled every 20 ms on a
    thread while it ran."""
    peak, done = [rss_mb()], threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak.append(rss_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start, cpu = time.perf_counter(), time.process_time()
    result = fn()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    done.set()
    sampler.join()
    return result, seconds, cpu, max(peak)


@dataclass
class Tally:
    """Per round: sentences per wall-clock second and per CPU second of the process (one torch thread: the CPU
    time is the method's own work, which a loaded machine stretches less than the wall time)."""

    rates: list[float] = field(default_factory=list)
    cpu_rates: list[float] = field(default_factory=list)
    sentences: int = 0
    peak_rss_mb: float = 0.0
    nll: dict[int, float] = field(default_factory=dict)

    def add(self, indexes: list[int], values: list[float], seconds: float, cpu: float, peak: float) -> None:
        self.rates.append(len(indexes) / seconds)
        self.cpu_rates.append(len(indexes) / max(cpu, 1e-9))
        self.sentences = len(indexes)
        self.peak_rss_mb = max(self.peak_rss_mb, peak)
        self.nll.update(zip(indexes, values, strict=True))


# -- counted work --------------------------------------------------------------------------------------------------
@dataclass
class Work:
    """What one method computed: token positions through the model body (padding included), positions whose
    LM-head logits were computed, and FLOPs as torch's FlopCounterMode counts matrix products, with attention
    counted dense (4 * heads * head_dim per (query, key) pair and layer, as the CPU kernel computes it), and the
    part of the attention FLOPs spent on pairs the attention mask excludes (causal upper triangle, padding, other
    sentences in a pack). Attention that runs on another kernel (CUDA, eager) is counted as its matrix products,
    without the masked-out part."""

    positions: int = 0
    head_rows: int = 0
    flops: int = 0
    attention: int = 0
    masked: int = 0


@contextmanager
def counting(model: Any) -> Iterator[Work]:
    from torch.utils.flop_counter import FlopCounterMode

    work = Work()

    def attention(query: Any, key: Any, value: Any, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
        """aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, *, attn_mask, scale):
        what scaled_dot_product_attention runs on a CPU (it is counted after decomposition)."""
        b, heads, q, dim = query.shape
        k = key.shape[-2]
        mask = kwargs.get("attn_mask")
        if mask is not None:
            excluded = ~mask if mask.dtype == torch.bool else mask != 0
            pairs = int(excluded.sum()) * (b * heads * q * k // excluded.numel())
        elif kwargs.get("is_causal", args[1] if len(args) > 1 else False) and q == k:
            pairs = b * heads * q * (q - 1) // 2
        else:
            pairs = 0
        dense = 4 * b * heads * q * k * dim
        work.attention += dense
        work.masked += 4 * dim * pairs
        return dense

    attention._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode passes tensors, not shapes
    hooks = [
        model.get_input_embeddings().register_forward_pre_hook(
            lambda _m, inputs: setattr(work, "positions", work.positions + inputs[0].numel())
        ),
        model.get_output_embeddings().register_forward_pre_hook(
            lambda _m, inputs: setattr(work, "head_rows", work.head_rows + inputs[0].numel() // inputs[0].shape[-1])
        ),
    ]
    counter = FlopCounterMode(
        display=False, custom_mapping={torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: attention}
    )
    try:
        with counter:
            yield work
    finally:
        for hook in hooks:
            hook.remove()
        work.flops = counter.get_total_flops()
