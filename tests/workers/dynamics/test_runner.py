"""The K-fold x E-epoch runner: bad inputs, fold assignment, loss bookkeeping, and that held-out runs never train on
their strings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workers.dynamics.model import EnsembleConfig, EnsembleGPT, token_nll
from workers.dynamics.runner import KFoldConfig, assign_folds, check_inputs, encode_texts, run_kfold, split_losses


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine is shared; tiny models gain nothing from more threads
    yield
    torch.set_num_threads(previous)


@pytest.mark.parametrize(
    ("n", "cfg", "message"),
    [
        (3, KFoldConfig(folds=4), "3 distinct strings cannot fill 4 folds"),
        (5, KFoldConfig(folds=1), "folds must be at least 2"),
        (5, KFoldConfig(folds=2, epochs=0), "epochs must be at least 1"),
        (5, KFoldConfig(folds=2, context=6), "exceeds the context of 6"),
    ],
)
def test_bad_inputs_name_the_problem(n, cfg, message):
    sequences = [[1, 2, 3, 4, 5]] * n
    with pytest.raises(ValueError, match=message):
        check_inputs(sequences, [1] * n, cfg)


def test_folds_are_stratified_by_frequency():
    counts = [50, 40, 30, 20, 9, 8, 7, 6, 1, 1, 1, 1]
    folds = assign_folds(counts, 4, seed=0)
    assert sorted(np.bincount(folds, minlength=4).tolist()) == [3, 3, 3, 3]
    assert sorted(folds[:4].tolist()) == [0, 1, 2, 3], "the four most frequent strings must land in four folds"
    assert (assign_folds(counts, 4, seed=0) == folds).all()


def test_split_losses_pairs_each_string_with_its_heldout_run():
    # run_loss[k, s, e] = 10*k + s + e/10: easy to read back
    k, s, e = 3, 4, 2
    run_loss = np.fromfunction(lambda a, b, c: 10 * a + b + c / 10, (k, s, e))
    folds = np.array([0, 1, 2, 1])
    train, held = split_losses(run_loss, folds)
    assert held[:, 0].tolist() == [0, 11, 22, 13]
    # string 0 is trained on by runs 1 and 2: mean(10, 20) + 0
    assert train[:, 1].tolist() == pytest.approx([15.1, 10 + 1.1, 5 + 2.1, 10 + 3.1])


def test_ensemble_members_do_not_share_gradients():
    torch.manual_seed(0)
    model = EnsembleGPT(2, EnsembleConfig(vocab_size=7, context=8, d_model=16, n_layer=1, n_head=2))
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    tokens = torch.randint(0, 7, (2, 4, 8))
    mask = torch.zeros(2, 4, 7)
    mask[0] = 1.0  # only member 0 has data
    token_nll(model, tokens, mask).sum().backward()
    opt.step()
    for p, p0 in zip(model.parameters(), before, strict=True):
        assert torch.equal(p[1], p0[1]), "member 1 moved although only member 0 had a loss"
    assert any(not torch.equal(p[0], p0[0]) for p, p0 in zip(model.parameters(), before, strict=True))


def test_heldout_runs_cannot_memorize_random_strings_that_training_runs_do():
    """Random strings carry nothing to learn from context: only a run that trains on a string can lower its loss,
    so if a held-out run ever saw its strings the gap below would vanish."""
    rng = np.random.default_rng(0)
    sequences = [rng.integers(0, 16, size=8).tolist() for _ in range(24)]
    cfg = KFoldConfig(folds=3, epochs=25, d_model=32, n_layer=1, n_head=2, batch_size=8, lr=1e-2, context=12)
    epochs_seen: list[int] = []
    result = run_kfold(sequences, [1] * 24, 16, cfg, on_epoch=epochs_seen.append)
    traj = result.trajectories
    assert epochs_seen == list(range(1, 26)) and traj.epochs == epochs_seen
    gap = traj.heldout_loss[:, -1] - traj.train_loss[:, -1]
    assert gap.min() > 0.3, f"held-out minus train loss at the last epoch: min {gap.min():.3f}, mean {gap.mean():.3f}"
    # a held-out run's loss on its own strings is its worst: random tokens cost ~log(16) = 2.77 nats
    assert traj.heldout_loss[:, -1].mean() > 2.0, traj.heldout_loss[:, -1].mean()
    assert result.run_loss.shape == (3, 24, 25)


def test_byte_level_encoding_of_user_strings():
    seqs, vocab = encode_texts(["ab", "é"])
    assert vocab == 256 and seqs == [[97, 98], [0xC3, 0xA9]]
