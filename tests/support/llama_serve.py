"""Runs llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``, the same arguments) for the
served-model tests, with one change to the peer's Python that changes no answer: the sort of each echoed token's
whole-vocabulary log-probs.

For every token of an echoed prompt, ``Llama._create_completion`` (llama_cpp/llama.py, 0.3.36) builds its
``top_logprobs`` from ``list(sorted(zip(logprobs_token, range(len(logprobs_token))), reverse=True))``: a Python sort
of 49,152 (numpy float, index) pairs, 50-85 ms a token on this machine, where llama.cpp's decode of the token costs a
few. Profiled (py-spy, tests/workers/lm/test_served_backend.py), that line was 54 % of the file's CPU. Here the
module's ``sorted`` is :func:`exact_sorted`: for exactly that call (an unstarted zip of a 1-D float array and its
positions, descending, no key) it orders the pairs with numpy and builds the same list, equal pairs of the same types
in the same order; any other call goes to the builtin. An echoed 55-token prompt then costs the server 1.1 CPU-s
instead of 4.0, with the same JSON. The scoring is still llama.cpp's, through the peer's server and its HTTP API.
tests/test_llama_serve.py checks ``exact_sorted`` against the builtin; tests/workers/lm/test_served_backend.py
checks a served completion against ``python -m llama_cpp.server``'s own, which ``MEMAUDIT_TEST_LLAMA_PLAIN=1`` runs
for every served test instead.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any

import numpy as np

_builtin_sorted = builtins.sorted


def exact_sorted(iterable: Iterable[Any], /, *, key: Any = None, reverse: bool = False) -> list[Any]:
    """``sorted(iterable, key=key, reverse=reverse)``; by numpy for the peer's call (:func:`_descending_logprobs`),
    by the builtin for any other."""
    if key is None and reverse and type(iterable) is zip:
        found = _descending_logprobs(iterable)
        if found is not None:
            return found
    return _builtin_sorted(iterable, key=key, reverse=reverse)


def _descending_logprobs(pairs: zip) -> list[tuple[Any, int]] | None:
    """``sorted(zip(row, range(len(row))), reverse=True)`` for an unstarted zip of a 1-D float array (at most 64-bit,
    no NaN) and ``range(len(row))``, read from the zip's own state (``__reduce__``, which consumes nothing); None
    for any other zip.

    The builtin orders the pairs by value, then by index, both descending: equal values in descending index (indices
    are distinct, so no two pairs are equal and the sort's stability plays no part). A stable ascending argsort of
    the negated, reversed row gives that order; the pairs are then built as the zip would have built them (the
    row's own scalars, of its dtype, and Python ints)."""
    state = pairs.__reduce__()
    if len(state) != 2 or len(state[1]) != 2:  # a strict zip carries a third item
        return None
    try:
        sources = [iterator.__reduce__() for iterator in state[1]]
    except TypeError:  # an iterator that cannot say its state (a generator)
        return None
    if any(not (isinstance(s, tuple) and len(s) == 3 and s[0] is iter and s[2] == 0) for s in sources):
        return None  # not two unstarted sequence iterators
    (row,), (positions,) = sources[0][1], sources[1][1]
    if not (isinstance(row, np.ndarray) and row.ndim == 1 and row.dtype.kind == "f" and row.dtype.itemsize <= 8):
        return None
    if positions != range(len(row)) or len(row) < 2 or np.isnan(row).any():
        return None
    order = len(row) - 1 - np.argsort(-row[::-1], kind="stable")
    return list(zip(row[order], order.tolist(), strict=True))


def main() -> None:
    import llama_cpp.llama
    from llama_cpp.server.__main__ import main as serve

    llama_cpp.llama.sorted = exact_sorted  # the module's global shadows the builtin for llama.py's calls only
    serve()


if __name__ == "__main__":
    main()
