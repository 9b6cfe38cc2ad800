"""Capacity over several seeds (Morris et al.: capacity = max over dataset sizes N of the memorization at
saturation): every seed is kept and reported, with the mean ± sd that enters capacity."""

from __future__ import annotations

import statistics

import pytest

from app.capacity.service import capacities
from app.db.models.capacity import CapacityCell


def create_cell(n: int, seed: int, bits: float | None, precision: str = "fp32") -> CapacityCell:
    return CapacityCell(
        n_layer=1,
        d_model=32,
        n_head=4,
        vocab_size=2048,
        seq_len=64,
        n_samples=n,
        seed=seed,
        precision=precision,
        params=80_416,
        entropy_bits=n * 64 * 11.0,
        status="done",
        memorized_bits=bits,
    )


def test_two_seeds_are_both_reported_and_capacity_is_their_mean():
    [arch] = capacities([create_cell(500, 0, 260_000.0), create_cell(500, 1, 200_000.0)])
    assert [(s.seed, s.capacity_bits, s.at_n) for s in arch.seeds] == [(0, 260_000.0, 500), (1, 200_000.0, 500)]
    assert arch.capacity_bits == pytest.approx(230_000.0), "the mean over seeds, not the last seed's 200,000"
    assert arch.capacity_sd_bits == pytest.approx(statistics.stdev([260_000.0, 200_000.0]))
    assert arch.bits_per_param == pytest.approx(230_000.0 / 80_416)
    assert arch.seed_capacity_mean_bits == pytest.approx(230_000.0)


def test_capacity_is_the_max_over_n_of_the_seed_mean():
    cells = [
        create_cell(500, 0, 250_000.0),
        create_cell(500, 1, 240_000.0),
        create_cell(700, 0, 262_000.0),
        create_cell(700, 1, 236_000.0),
        create_cell(1000, 0, None),
    ]  # a cell still running
    [arch] = capacities(cells)
    assert [(d.n_samples, d.seeds, d.mean_bits) for d in arch.by_n] == [(500, 2, 245_000.0), (700, 2, 249_000.0)]
    assert (arch.at_n, arch.capacity_bits) == (700, 249_000.0)
    # each seed's own max over N: seed 0 peaks at 700, seed 1 at 500
    assert [(s.seed, s.at_n, s.capacity_bits) for s in arch.seeds] == [(0, 700, 262_000.0), (1, 500, 240_000.0)]
    assert arch.seed_capacity_mean_bits == pytest.approx(251_000.0), "mean of per-seed maxima, reported beside"


def test_one_seed_has_no_spread_and_no_cell_no_capacity():
    [arch] = capacities([create_cell(500, 0, 100.0)])
    assert arch.capacity_bits == 100.0 and arch.capacity_sd_bits is None and arch.seed_capacity_sd_bits is None
    [empty] = capacities([create_cell(500, 0, None)])
    assert empty.capacity_bits is None and empty.seeds == [] and empty.by_n == []
