"""tests/support/llama_serve.py's sort: what the served-model tests' llama-cpp-python server uses for each echoed
token's vocabulary. It must equal the builtin ``sorted`` for the peer's call and leave every other call to it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.llama_serve import _descending_logprobs, exact_sorted


def peer_call(row: np.ndarray) -> zip:
    return zip(row, range(len(row)), strict=False)  # llama_cpp/llama.py's sort input, one echoed token's log-probs


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("size", [2, 3, 1000, 49_152])
def test_the_peers_call_sorts_as_the_builtin(dtype, size):
    rng = np.random.default_rng(size)
    row = rng.standard_normal(size).astype(dtype)
    if size > 3:
        row = np.round(row, 1)  # many ties, broken by the index (descending)
        row[1:9] = [-np.inf, -np.inf, np.inf, 0.0, -0.0, 0.0, row[0], row[0]]
    assert _descending_logprobs(peer_call(row)) is not None  # the numpy path is taken
    mine, theirs = exact_sorted(peer_call(row), reverse=True), sorted(peer_call(row), reverse=True)
    assert mine == theirs
    assert [(type(v), type(i), str(v)) for v, i in mine] == [(type(v), type(i), str(v)) for v, i in theirs]


def test_every_other_call_is_the_builtins():
    row = np.array([0.5, -1.0, 0.5, 2.0], dtype=np.float32)
    started = peer_call(row)
    next(started)
    with_nan = row.copy()
    with_nan[2] = np.nan
    others = [
        zip(row, range(1, 5), strict=False),  # not the row's positions
        zip(list(row), range(4), strict=False),  # not an array
        zip(row, range(4), strict=True),
        zip(row.astype(np.int64), range(4), strict=False),
        zip(np.zeros((2, 2)), range(2), strict=False),
        zip(with_nan, range(4), strict=False),
        zip((x for x in row), range(4), strict=False),  # a generator cannot say its state
        started,
    ]
    for pairs in others:
        assert _descending_logprobs(pairs) is None
    assert exact_sorted(peer_call(row), reverse=True) == sorted(peer_call(row), reverse=True)
    assert exact_sorted([3, 1, 2]) == [1, 2, 3] and exact_sorted([3, 1, 2], reverse=True) == [3, 2, 1]
    by_index = exact_sorted(peer_call(row), key=lambda pair: pair[1], reverse=True)
    assert by_index == sorted(peer_call(row), key=lambda pair: pair[1], reverse=True)
    assert exact_sorted(zip(["b", "a"], range(2), strict=False), reverse=True) == [("b", 0), ("a", 1)]
    rest = list(started)  # the started zip was left unconsumed by the check
    assert len(rest) == 3
