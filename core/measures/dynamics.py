"""Memorization measures over training dynamics (Ghosh et al., "Rethinking memorization measures and their
implications in large language models", 2025).

Input: for every string x and every recorded epoch e, two per-token losses (nats/token):
  L_tr(x, e)  the loss of x in runs that trained on x (K-fold: mean over the K-1 runs whose training folds hold x)
  L_ho(x, e)  the loss of x in the run that held x out
Three readings, per string and epoch:
  recollection     L_tr(x, e) < tau                               (fixed threshold; tau = 0.2 nats/token by default)
  counterfactual   L_ho(x, e) - L_tr(x, e) > margin               (Zhang et al. 2021, with losses as performance)
  contextual       L_tr(x, e) < tau*_x,  tau*_x = min_e' L_ho(x, e')  (the optimal contextual threshold)
Onset = the first recorded epoch at which the reading holds (None if it never does).

Lemma 1 (the paper): with margin 0, contextual at e implies counterfactual at e, because
L_tr(x, e) < min_e' L_ho(x, e') <= L_ho(x, e); so contextual onset is never earlier than counterfactual onset.

Approximations (documented in docs/dynamics.md): losses are per-token means over the model's scored tokens; the
paper's expectation over training runs is the mean over the K-1 fold runs that saw x (one held-out run per string);
the optimal contextual threshold is the minimum over the *recorded* epochs only.

Pure: numpy in, plain types out. No torch, no DB.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

DEFAULT_TAU = 0.2  # nats/token, the paper's example threshold for recollection
DEFAULT_MARGIN = 0.0  # counterfactual margin; 0 makes Lemma 1 hold exactly
MEASURES = ("recollection", "counterfactual", "contextual")


@dataclass(frozen=True)
class Trajectories:
    """Per-string loss trajectories. ``train_loss`` and ``heldout_loss`` are [strings, epochs] in nats/token."""

    string_ids: list[str]
    epochs: list[int]
    train_loss: np.ndarray
    heldout_loss: np.ndarray
    frequency: list[float] | None = None

    def __post_init__(self) -> None:
        shape = (len(self.string_ids), len(self.epochs))
        if min(shape) < 1:
            raise ValueError("trajectories need at least one string and one epoch")
        if any(b <= a for a, b in zip(self.epochs, self.epochs[1:], strict=False)):
            raise ValueError("epochs must be strictly increasing")
        for name in ("train_loss", "heldout_loss"):
            arr = getattr(self, name)
            if arr.shape != shape:
                raise ValueError(f"{name} has shape {arr.shape}, expected {shape} (strings x epochs)")
        if self.frequency is not None and len(self.frequency) != shape[0]:
            raise ValueError("frequency must have one entry per string")


@dataclass(frozen=True)
class Flags:
    """Boolean [strings, epochs] flags of the three readings, plus the scores they threshold."""

    recollection: np.ndarray
    counterfactual: np.ndarray
    contextual: np.ndarray
    counterfactual_score: np.ndarray  # L_ho - L_tr, [strings, epochs]
    contextual_threshold: np.ndarray  # tau*_x, [strings]

    def of(self, measure: str) -> np.ndarray:
        return getattr(self, measure)


@dataclass
class EpochSummary:
    epoch: int
    share: dict[str, float]  # share of distinct strings memorized under each measure at this epoch
    share_weighted: dict[str, float] | None  # share of training occurrences (weights = frequency), if known
    mean_train_loss: float
    mean_heldout_loss: float


@dataclass
class DynamicsSummary:
    epochs: list[EpochSummary]
    best_heldout_epoch: int  # epoch of the lowest mean held-out loss ("optimal learning")
    final: dict[str, int]  # strings flagged at the last epoch, per measure
    agreement: dict[str, dict[str, float | int | None]] = field(default_factory=dict)
    onset_rank_correlation: dict[str, float | None] = field(default_factory=dict)
    params: dict[str, float] = field(default_factory=dict)


def recollection(train_loss: np.ndarray, tau: float = DEFAULT_TAU) -> np.ndarray:
    """Recollection-based memorization: L_tr(x, e) < tau."""
    return np.asarray(train_loss) < tau


def counterfactual_score(train_loss: np.ndarray, heldout_loss: np.ndarray) -> np.ndarray:
    """Counterfactual memorization with loss as (negative) performance: L_ho(x, e) - L_tr(x, e).
    inf - inf is NaN, which compares false with any margin: two infinite losses show no difference."""
    with np.errstate(invalid="ignore"):
        return np.asarray(heldout_loss) - np.asarray(train_loss)


def counterfactual(train_loss: np.ndarray, heldout_loss: np.ndarray, margin: float = DEFAULT_MARGIN) -> np.ndarray:
    """Counterfactual memorization: L_ho(x, e) - L_tr(x, e) > margin."""
    return counterfactual_score(train_loss, heldout_loss) > margin


def optimal_contextual_threshold(heldout_loss: np.ndarray) -> np.ndarray:
    """tau*_x = min over epochs of L_ho(x, e'): the best the model does on x from context alone, never trained on x."""
    return np.min(np.asarray(heldout_loss), axis=1)


def contextual(train_loss: np.ndarray, heldout_loss: np.ndarray) -> np.ndarray:
    """Contextual memorization: L_tr(x, e) < tau*_x (strict: equal to the best held-out loss is not memorized)."""
    threshold = optimal_contextual_threshold(heldout_loss)
    return np.asarray(train_loss) < threshold[:, None]


def onsets(flags: np.ndarray, epochs: list[int]) -> list[int | None]:
    """First epoch at which each string's flag holds, or None."""
    flags = np.asarray(flags, dtype=bool)
    first = np.argmax(flags, axis=1)
    return [int(epochs[i]) if flags[s, i] else None for s, i in enumerate(first)]


def compute_flags(traj: Trajectories, tau: float = DEFAULT_TAU, margin: float = DEFAULT_MARGIN) -> Flags:
    score = counterfactual_score(traj.train_loss, traj.heldout_loss)
    return Flags(
        recollection=recollection(traj.train_loss, tau),
        counterfactual=score > margin,
        contextual=contextual(traj.train_loss, traj.heldout_loss),
        counterfactual_score=score,
        contextual_threshold=optimal_contextual_threshold(traj.heldout_loss),
    )


def rankdata(values: np.ndarray) -> np.ndarray:
    """Average ranks (1-based), ties share the mean rank, as in Spearman's rho."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=float)
    sorted_vals = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rank correlation; None when undefined (fewer than 2 values or a constant side)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(a) != len(b):
        return None
    ra, rb = rankdata(a), rankdata(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = float(np.sqrt((ra**2).sum() * (rb**2).sum()))
    if denom == 0.0:
        return None
    return float((ra * rb).sum() / denom)


def agreement(a: np.ndarray, b: np.ndarray) -> dict[str, float | int | None]:
    """Which strings two measures flag: both, only one, neither, and the Jaccard index of the flagged sets."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    both, union = int((a & b).sum()), int((a | b).sum())
    return {
        "both": both,
        "only_first": int((a & ~b).sum()),
        "only_second": int((~a & b).sum()),
        "neither": int((~a & ~b).sum()),
        "jaccard": both / union if union else None,
    }


def censored_onsets(flags: np.ndarray, epochs: list[int]) -> np.ndarray:
    """Onsets with 'never' mapped to one past the last epoch, so that never-flagged strings rank last."""
    never = (max(epochs) + 1) if epochs else 1
    return np.array([never if o is None else o for o in onsets(flags, epochs)], dtype=float)


def summarize(traj: Trajectories, tau: float = DEFAULT_TAU, margin: float = DEFAULT_MARGIN) -> DynamicsSummary:
    """Per-epoch shares, the epoch of best held-out loss, final-epoch agreement and onset rank correlations."""
    flags = compute_flags(traj, tau, margin)
    weights = None if traj.frequency is None else np.asarray(traj.frequency, dtype=float)
    if weights is not None and not weights.sum() > 0:
        weights = None
    per_epoch = [
        EpochSummary(
            epoch=int(e),
            share={m: float(flags.of(m)[:, i].mean()) for m in MEASURES},
            share_weighted=None
            if weights is None
            else {m: float(np.average(flags.of(m)[:, i], weights=weights)) for m in MEASURES},
            mean_train_loss=float(traj.train_loss[:, i].mean()),
            mean_heldout_loss=float(traj.heldout_loss[:, i].mean()),
        )
        for i, e in enumerate(traj.epochs)
    ]
    best = int(traj.epochs[int(np.argmin(traj.heldout_loss.mean(axis=0)))])
    pairs = [(a, b) for i, a in enumerate(MEASURES) for b in MEASURES[i + 1 :]]
    ons = {m: censored_onsets(flags.of(m), traj.epochs) for m in MEASURES}
    return DynamicsSummary(
        epochs=per_epoch,
        best_heldout_epoch=best,
        final={m: int(flags.of(m)[:, -1].sum()) for m in MEASURES},
        agreement={f"{a}~{b}": agreement(flags.of(a)[:, -1], flags.of(b)[:, -1]) for a, b in pairs},
        onset_rank_correlation={f"{a}~{b}": spearman(ons[a], ons[b]) for a, b in pairs},
        params={"tau": tau, "margin": margin},
    )


@dataclass
class StringResult:
    string_id: str
    frequency: float | None
    contextual_threshold: float
    flags: dict[str, bool]  # at the final epoch
    onset: dict[str, int | None]
    train_loss: list[float]
    heldout_loss: list[float]


def per_string(traj: Trajectories, tau: float = DEFAULT_TAU, margin: float = DEFAULT_MARGIN) -> list[StringResult]:
    """The per-string table: final-epoch flag and onset of each measure, threshold and both loss curves."""
    flags = compute_flags(traj, tau, margin)
    ons = {m: onsets(flags.of(m), traj.epochs) for m in MEASURES}
    return [
        StringResult(
            string_id=sid,
            frequency=None if traj.frequency is None else float(traj.frequency[s]),
            contextual_threshold=float(flags.contextual_threshold[s]),
            flags={m: bool(flags.of(m)[s, -1]) for m in MEASURES},
            onset={m: ons[m][s] for m in MEASURES},
            train_loss=[float(v) for v in traj.train_loss[s]],
            heldout_loss=[float(v) for v in traj.heldout_loss[s]],
        )
        for s, sid in enumerate(traj.string_ids)
    ]


def frequency_correlation(flags_at_epoch: np.ndarray, frequency: list[float]) -> float | None:
    """Spearman correlation between a measure's flags (0/1) and string frequency (the paper's ordering question)."""
    return spearman(np.asarray(flags_at_epoch, dtype=float), np.asarray(frequency, dtype=float))


def summary_json(traj: Trajectories, tau: float = DEFAULT_TAU, margin: float = DEFAULT_MARGIN) -> dict[str, Any]:
    """A dynamics audit's summary as plain JSON: :func:`summarize` (its epochs under ``per_epoch``) and, when the
    strings have frequencies, each measure's final-epoch flag correlated with frequency."""
    out = asdict(summarize(traj, tau, margin))
    out["per_epoch"] = out.pop("epochs")
    if traj.frequency is not None:
        flags = compute_flags(traj, tau, margin)
        out["frequency_correlation"] = {m: frequency_correlation(flags.of(m)[:, -1], traj.frequency) for m in MEASURES}
    return out
