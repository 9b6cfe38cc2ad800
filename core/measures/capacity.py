"""Capacity measures of Morris et al., "How much do language models memorize?" (2025). Pure: numpy in/out.

Conventions: NLLs are in bits (``nll_bits``) unless a name says nats; one sample is a sequence of S tokens.

- Dataset entropy of N uniform sequences over V tokens: H(D) = N · S · log2 V                  (Sec. 3)
- Notation as the paper's: θ the true data-generating process (or a reference model for it), θ̂ the trained model;
  mem_U(x, θ, θ̂) = H^K(x | θ) − H^K(x | θ, θ̂).
- Unintended memorization of a uniform sample: mem_U(x) = max(0, S · log2 V − NLL₂(x | θ̂))      (Eq. 6)
  (θ is uniform, so H^K(x | θ) = S · log2 V exactly; the trained model's code length is its NLL)
- Memorized bits of a dataset: Σ_x mem_U(x); capacity = max over dataset sizes N; bits per parameter.
- Text mode: mem_U(x) = max(0, NLL₂(x | θ) − NLL₂(x | θ̂)) with θ a reference model, from
  H^K(x | θ, θ̂) ≈ −log2 max(p(x|θ), p(x|θ̂)).
- Loss-threshold membership inference: AUC, and F1 at the break-even threshold (as many samples called members
  as there are members, so precision = recall), on balanced member / non-member sets (``balanced_sets``) so that
  chance gives 0.5, the floor of the paper's scaling law.
- Scaling law (Sec. 6): F1 = ½ (1 + c1 σ(c2 (x + c3))), c1 = 1.34, c2 = −0.034, c3 = −33.14, with
  x = 1000 · N / P (training samples per thousand parameters); see ``MIA_X_SCALE`` for why.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

MIA_C1 = 1.34
MIA_C2 = -0.034
MIA_C3 = -33.14
# The paper prints the law's argument as Capacity(θ)/|D|, which moves F1 the wrong way with c2 < 0 (F1 would
# approach 1 as the dataset grows). Its validation table pairs each model with dataset sizes in a fixed
# proportion to its parameter count (N/P = 0.10967, 0.04935, 0.01211 for F1 = 0.55, 0.75, 0.95, for both the
# 1.5B and the 124M model), so the argument is k · N / P. Solving the law for each row gives k = 977, 981 and
# 998; every k in [943, 1019] reproduces all six rows within 0.01. We use k = 1000 — training samples per
# thousand parameters — which also equals, to 0.05 %, the dataset's uniform-token entropy per parameter for
# the paper's text setting (64 tokens × log2 50257 = 999.5 bits per sample).
MIA_X_SCALE = 1000.0


def gpt2_param_count(n_layer: int, d_model: int, vocab_size: int, context: int) -> int:
    """Parameters of the GPT-2-style models capacity runs train (workers.training.model): embeddings of
    V + 1 tokens (BOS included) and ``context`` positions, L pre-LN blocks with a 4x MLP, final LayerNorm;
    the head is tied to the embeddings and counted once, as the paper does."""
    d = d_model
    block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
    return (vocab_size + 1) * d + context * d + n_layer * block + 2 * d


def dataset_entropy_bits(n_samples: int, seq_len: int, vocab_size: int) -> float:
    """H(D) = N · S · log2 V for N sequences of S tokens drawn uniformly from V."""
    return float(n_samples) * seq_len * math.log2(vocab_size)


def memorized_bits_per_sample(nll_bits: ArrayLike, seq_len: int, vocab_size: int) -> np.ndarray:
    """mem_U(x) = max(0, S · log2 V − NLL₂(x | θ̂)) for each uniform sample (Eq. 6 with a uniform θ)."""
    nll = np.asarray(nll_bits, dtype=np.float64)
    return np.maximum(0.0, seq_len * math.log2(vocab_size) - nll)


def memorized_bits(nll_bits: ArrayLike, seq_len: int, vocab_size: int) -> float:
    """Σ_x mem_U(x): the unintended memorization of a uniform dataset, in bits."""
    return float(memorized_bits_per_sample(nll_bits, seq_len, vocab_size).sum())


def capacity_bits(memorized_by_n: Mapping[int, float]) -> tuple[int, float]:
    """Capacity = max over dataset sizes N of memorized bits. Returns (argmax N, capacity in bits)."""
    if not memorized_by_n:
        raise ValueError("capacity needs at least one dataset size")
    n_best = max(memorized_by_n, key=lambda n: memorized_by_n[n])
    return n_best, float(memorized_by_n[n_best])


def bits_per_parameter(bits: float, n_params: int) -> float:
    if n_params <= 0:
        raise ValueError(f"n_params must be positive, got {n_params}")
    return bits / n_params


class Cell(Protocol):
    """One trained grid cell, as capacity per architecture needs it (a stored cell row fits)."""

    n_layer: int
    d_model: int
    n_head: int
    precision: str
    n_samples: int
    seed: int
    params: int
    memorized_bits: float | None


def architecture_label(n_layer: int, d_model: int, n_head: int) -> str:
    return f"L{n_layer}-d{d_model}-h{n_head}"


def _mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    mean = statistics.fmean(values)
    return mean, statistics.stdev(values) if len(values) > 1 else None


def capacity_by_architecture(cells: Iterable[Cell]) -> list[dict[str, Any]]:
    """Per architecture and precision, over the cells done so far. Morris et al. take capacity as the max over
    dataset sizes N of the memorization at saturation; with several seeds each N's memorized bits are averaged
    over its seeds first and capacity is the max over N of that mean (``capacity_bits``, which bits/param
    divides): a max over noisy per-seed values would be biased upward. Every seed's own max over N is reported
    beside it (``seeds``), with their mean ± sd, and each N's mean ± sd (``by_n``). Plain dicts out."""
    groups: dict[tuple[str, str], list[Cell]] = {}
    for c in cells:
        groups.setdefault((architecture_label(c.n_layer, c.d_model, c.n_head), c.precision), []).append(c)
    return [_architecture_capacity(label, precision, members) for (label, precision), members in groups.items()]


def _architecture_capacity(label: str, precision: str, members: list[Cell]) -> dict[str, Any]:
    params = members[0].params
    by_seed: dict[int, dict[int, float]] = {}
    by_n: dict[int, list[float]] = {}
    for c in sorted((c for c in members if c.memorized_bits is not None), key=lambda c: (c.seed, c.n_samples)):
        by_seed.setdefault(c.seed, {})[c.n_samples] = c.memorized_bits
        by_n.setdefault(c.n_samples, []).append(c.memorized_bits)
    seeds = []
    for seed, curve in by_seed.items():
        n_best, bits = capacity_bits(curve)
        seeds.append(
            {"seed": seed, "capacity_bits": bits, "at_n": n_best, "bits_per_param": bits_per_parameter(bits, params)}
        )
    sizes = [
        {"n_samples": n, "seeds": len(v), "mean_bits": _mean_sd(v)[0], "sd_bits": _mean_sd(v)[1]}
        for n, v in sorted(by_n.items())
    ]
    best = max(sizes, key=lambda d: d["mean_bits"], default=None)
    seed_mean, seed_sd = _mean_sd([s["capacity_bits"] for s in seeds]) if seeds else (None, None)
    return {
        "architecture": label,
        "precision": precision,
        "params": params,
        "capacity_bits": None if best is None else best["mean_bits"],
        "capacity_sd_bits": None if best is None else best["sd_bits"],
        "at_n": None if best is None else best["n_samples"],
        "bits_per_param": None if best is None else bits_per_parameter(best["mean_bits"], params),
        "seeds": seeds,
        "seed_capacity_mean_bits": seed_mean,
        "seed_capacity_sd_bits": seed_sd,
        "by_n": sizes,
    }


def nats_to_bits(nats: ArrayLike) -> np.ndarray:
    return np.asarray(nats, dtype=np.float64) / math.log(2.0)


def text_memorization_bits(nll_ref_bits: ArrayLike, nll_target_bits: ArrayLike) -> np.ndarray:
    """Text-mode mem_U(x) = max(0, NLL₂(x | θ) − NLL₂(x | θ̂)), per sample, in bits (θ the reference, θ̂ the model).

    H^K(x | θ) is estimated by the reference's code length and H^K(x | θ, θ̂) by −log2 max(p(x|θ), p(x|θ̂)),
    i.e. the shorter of the two code lengths; their difference is the reference NLL minus the smaller NLL.
    """
    ref = np.asarray(nll_ref_bits, dtype=np.float64)
    target = np.asarray(nll_target_bits, dtype=np.float64)
    if ref.shape != target.shape:
        raise ValueError(f"reference and target NLLs differ in shape: {ref.shape} vs {target.shape}")
    return np.maximum(0.0, ref - target)


def tfidf_rarity(documents: Sequence[Sequence[str]]) -> np.ndarray:
    """Per-document rarity: the TF-IDF-weighted mean IDF of its tokens, IDF = ln(N / df) over the collection.

    High values mean a sample is made of tokens few other samples contain (the paper finds such samples are
    the most memorized in text mode).
    """
    n_docs = len(documents)
    df: Counter[str] = Counter()
    for doc in documents:
        df.update(set(doc))
    rarity = np.zeros(n_docs)
    for i, doc in enumerate(documents):
        if not doc:
            continue
        tf = Counter(doc)
        idf = {t: math.log(n_docs / df[t]) for t in tf}
        weights = sum(tf[t] * idf[t] for t in tf)
        rarity[i] = weights / len(doc)
    return rarity


def mia_auc(member_nll: ArrayLike, nonmember_nll: ArrayLike) -> float:
    """AUC of the loss-threshold attack (lower loss = member): P(loss_member < loss_nonmember), ties count ½."""
    m = np.asarray(member_nll, dtype=np.float64)
    h = np.asarray(nonmember_nll, dtype=np.float64)
    if m.size == 0 or h.size == 0:
        raise ValueError("AUC needs at least one member and one non-member")
    scores = np.concatenate([m, h])
    ranks = _average_ranks(scores)
    rank_sum_members = ranks[: m.size].sum()
    # Mann-Whitney U for "member loss is smaller": count pairs where the member ranks lower.
    u = m.size * h.size + m.size * (m.size + 1) / 2 - rank_sum_members
    return float(u / (m.size * h.size))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(values.size)
    sorted_vals = values[order]
    i = 0
    while i < values.size:
        j = i
        while j + 1 < values.size and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def mia_f1(member_nll: ArrayLike, nonmember_nll: ArrayLike) -> float:
    """F1 of the loss-threshold attack at the break-even threshold.

    The attack calls the |members| lowest-loss samples members, so precision = recall = F1; ties at the
    threshold are shared in proportion. Chance level is |members| / (|members| + |non-members|), 0.5 when the
    two sets are the same size (the paper's setting and the floor of its scaling law).
    """
    m = np.asarray(member_nll, dtype=np.float64)
    h = np.asarray(nonmember_nll, dtype=np.float64)
    if m.size == 0 or h.size == 0:
        raise ValueError("F1 needs at least one member and one non-member")
    k = m.size
    threshold = np.sort(np.concatenate([m, h]))[k - 1]
    below_m, below_h = float((m < threshold).sum()), float((h < threshold).sum())
    tied_m, tied_h = float((m == threshold).sum()), float((h == threshold).sum())
    take = k - below_m - below_h  # how many of the tied samples the attack labels as members
    true_pos = below_m + take * tied_m / (tied_m + tied_h)
    return true_pos / k


def balanced_sets(member_nll: ArrayLike, nonmember_nll: ArrayLike, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Equal-sized member and non-member sets for the MIA: the larger set is subsampled (without replacement,
    seeded) to the size of the smaller. With unequal sets the break-even F1 of a blind attack is
    |members| / (|members| + |non-members|) — 0.8 with 4,000 members against 1,000 non-members — not the 0.5
    that the paper's law has as its floor."""
    m = np.asarray(member_nll, dtype=np.float64)
    h = np.asarray(nonmember_nll, dtype=np.float64)
    size = min(m.size, h.size)
    rng = np.random.default_rng(seed)
    pick = lambda a: a if a.size == size else a[np.sort(rng.choice(a.size, size, replace=False))]  # noqa: E731
    return pick(m), pick(h)


def predicted_mia_f1(n_params: float, n_samples: float) -> float:
    """Morris et al. scaling law: F1 = ½ (1 + c1 σ(c2 (x + c3))), x = 1000 · N / P. → 0.5 as N grows.

    The fitted curve exceeds 1 (up to 1.006) for N / P < 0.0014; F1 cannot, so the result is capped at 1.
    """
    if n_params <= 0 or n_samples <= 0:
        raise ValueError("n_params and n_samples must be positive")
    x = MIA_X_SCALE * n_samples / n_params
    return min(1.0, 0.5 * (1.0 + MIA_C1 * _sigmoid(MIA_C2 * (x + MIA_C3))))


def dataset_size_for_f1(n_params: float, f1: float) -> float:
    """Inverse of the law: the training-set size N at which loss-based MIA reaches ``f1`` for P parameters."""
    if not 0.5 < f1 <= 1.0:
        raise ValueError(f"f1 must lie in (0.5, 1], the law's range; got {f1}")
    s = (2.0 * f1 - 1.0) / MIA_C1
    x = math.log(s / (1.0 - s)) / MIA_C2 - MIA_C3
    return max(0.0, x * n_params / MIA_X_SCALE)


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def extraction_rate(correct_from_prefix: Iterable[bool]) -> float:
    """Share of samples whose continuation greedy decoding reproduces exactly from their prefix."""
    flags = list(correct_from_prefix)
    return sum(flags) / len(flags) if flags else 0.0
