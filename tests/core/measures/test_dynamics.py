"""The memorization measures of Ghosh et al. (2025) on hand-made trajectories, and Lemma 1 as a property test."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import spearmanr

from core.measures.dynamics import (
    Trajectories,
    agreement,
    compute_flags,
    contextual,
    counterfactual,
    onsets,
    optimal_contextual_threshold,
    per_string,
    recollection,
    spearman,
    summarize,
)


def create_trajectories(train: list[list[float]], heldout: list[list[float]], frequency=None) -> Trajectories:
    return Trajectories(
        string_ids=[f"s{i}" for i in range(len(train))],
        epochs=list(range(1, len(train[0]) + 1)),
        train_loss=np.array(train, dtype=float),
        heldout_loss=np.array(heldout, dtype=float),
        frequency=frequency,
    )


# three strings over four epochs, worked out by hand below
TRAIN = [[1.0, 0.5, 0.15, 0.1], [0.9, 0.3, 0.25, 0.19], [0.3, 0.2, 0.2, 0.2]]
HELDOUT = [[1.0, 0.8, 1.0, 1.2], [1.0, 0.3, 0.2, 0.25], [0.3, 0.2, 0.2, 0.2]]


def test_measures_match_hand_computed_values():
    traj = create_trajectories(TRAIN, HELDOUT)
    flags = compute_flags(traj, tau=0.2, margin=0.0)
    # recollection: train < 0.2
    assert flags.recollection.tolist() == [
        [False, False, True, True],
        [False, False, False, True],
        [False, False, False, False],
    ]
    # counterfactual: heldout - train > 0 (s1 epoch 2: 0.3 - 0.3 = 0 is not memorized)
    assert flags.counterfactual.tolist() == [
        [False, True, True, True],
        [True, False, False, True],
        [False, False, False, False],
    ]
    # optimal contextual thresholds: min heldout = 0.8, 0.2, 0.2
    assert optimal_contextual_threshold(traj.heldout_loss).tolist() == [0.8, 0.2, 0.2]
    # contextual: train < threshold; s1 at epoch 4 (0.19 < 0.2) only; s2 equals its threshold, never below
    assert flags.contextual.tolist() == [
        [False, True, True, True],
        [False, False, False, True],
        [False, False, False, False],
    ]
    assert onsets(flags.counterfactual, traj.epochs) == [2, 1, None]
    assert onsets(flags.contextual, traj.epochs) == [2, 4, None]
    assert onsets(flags.recollection, traj.epochs) == [3, 4, None]


def test_functions_agree_with_compute_flags_and_margin_raises_the_bar():
    train, held = np.array(TRAIN), np.array(HELDOUT)
    assert (recollection(train, 0.2) == compute_flags(create_trajectories(TRAIN, HELDOUT)).recollection).all()
    assert (contextual(train, held) == compute_flags(create_trajectories(TRAIN, HELDOUT)).contextual).all()
    # with margin 0.5 only s0 counts, from epoch 3 on (scores 0.85 and 1.1)
    assert onsets(counterfactual(train, held, margin=0.5), [1, 2, 3, 4]) == [3, None, None]


def test_summary_per_epoch_shares_best_epoch_and_weighted_share():
    traj = create_trajectories(TRAIN, HELDOUT, frequency=[1.0, 1.0, 8.0])
    summary = summarize(traj, tau=0.2)
    shares = [e.share["contextual"] for e in summary.epochs]
    assert shares == pytest.approx([0, 1 / 3, 1 / 3, 2 / 3])
    # weighted by frequency the frequent, never-memorized s2 dominates
    assert summary.epochs[3].share_weighted["contextual"] == pytest.approx(2 / 10)
    # mean heldout per epoch: 0.767, 0.433, 0.467, 0.55 -> best is epoch 2
    assert summary.best_heldout_epoch == 2
    assert summary.final == {"recollection": 2, "counterfactual": 2, "contextual": 2}
    pair = summary.agreement["recollection~contextual"]
    assert (pair["both"], pair["only_first"], pair["only_second"], pair["neither"]) == (2, 0, 0, 1)


def test_per_string_rows_carry_flags_onsets_and_curves():
    rows = per_string(create_trajectories(TRAIN, HELDOUT, frequency=[3, 2, 1]), tau=0.2)
    assert [r.string_id for r in rows] == ["s0", "s1", "s2"]
    assert rows[1].flags == {"recollection": True, "counterfactual": True, "contextual": True}
    assert rows[1].onset == {"recollection": 4, "counterfactual": 1, "contextual": 4}
    assert rows[2].onset == {"recollection": None, "counterfactual": None, "contextual": None}
    assert rows[0].heldout_loss == HELDOUT[0] and rows[0].frequency == 3.0


@given(
    a=arrays(np.float64, st.integers(2, 30), elements=st.integers(-5, 5).map(float)),
    b=arrays(np.float64, st.integers(2, 30), elements=st.floats(-10, 10)),
)
def test_spearman_matches_scipy_including_ties(a, b):
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    ours = spearman(a, b)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        assert ours is None
    else:
        assert ours == pytest.approx(spearmanr(a, b).statistic, abs=1e-9)


def test_agreement_counts_and_jaccard():
    out = agreement(np.array([1, 1, 0, 0, 1], bool), np.array([1, 0, 1, 0, 1], bool))
    assert out == {"both": 2, "only_first": 1, "only_second": 1, "neither": 1, "jaccard": 0.5}
    assert agreement(np.zeros(3, bool), np.zeros(3, bool))["jaccard"] is None


def test_trajectories_reject_bad_shapes():
    with pytest.raises(ValueError, match="shape"):
        Trajectories(["a"], [1, 2], np.zeros((1, 2)), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="increasing"):
        Trajectories(["a"], [2, 1], np.zeros((1, 2)), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="at least one"):
        Trajectories([], [1], np.zeros((0, 1)), np.zeros((0, 1)))


losses = st.floats(min_value=0.0, allow_nan=False) | st.sampled_from([0.0, 0.2, 5e-324, float("inf")])


@st.composite
def trajectories(draw) -> tuple[np.ndarray, np.ndarray]:
    strings, epochs = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    shape = (strings, epochs)
    train = draw(arrays(np.float64, shape, elements=losses))
    # held-out losses near the train losses make ties and near-ties, where an off-by-one would show
    jitter = draw(arrays(np.float64, shape, elements=st.sampled_from([0.0, 0.0, 1e-12, -1e-12, 0.5, -0.5])))
    held = np.where(
        draw(st.booleans()), np.clip(train + jitter, 0, None), draw(arrays(np.float64, shape, elements=losses))
    )
    return train, held


@settings(max_examples=200, deadline=None)
@given(trajectories())
def test_lemma_1_contextual_onset_is_never_before_counterfactual_onset(tr_ho):
    """Ghosh et al. (2025), Lemma 1: with margin 0, contextual memorization at e implies counterfactual at e."""
    train, held = tr_ho
    epochs = list(range(1, train.shape[1] + 1))
    ctx = contextual(train, held)
    cf = counterfactual(train, held, margin=0.0)
    assert not (ctx & ~cf).any(), "a string is contextually memorized at an epoch where it is not counterfactually"
    for s, (c_on, f_on) in enumerate(zip(onsets(ctx, epochs), onsets(cf, epochs), strict=True)):
        if c_on is not None:
            assert f_on is not None and c_on >= f_on, f"string {s}: contextual onset {c_on}, counterfactual {f_on}"
