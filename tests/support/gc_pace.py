"""The cyclic garbage collector in the suite's own processes: a slower pace in the test (xdist) processes, and the
zygote's imports frozen before it forks workers, APIs and commands.

Python's default thresholds (700, 10, 10) run a young collection every 700 allocations net of frees, and a full one
whenever a quarter more objects have survived than the heap held after the last: in a test process that holds
torch, transformers, SQLAlchemy, a test's stored rows and result dicts, a full collection walks a million objects or
more. Measured on tests/e2e/test_knowledge_free.py alone (gc.callbacks, one process): 7.2 s of its 75 CPU-s in
the collector (29 full collections, 5.5 s of it); at (50,000, 20, 10) 2.2 s (3 full collections). The same objects
are freed: only reference cycles wait longer for their collection (memory), and the test processes have room for
them. The processes the tests start as the product runs them (forked workers, APIs, commands) keep Python's
thresholds: an event stream's slot, for one, is given back when its generator is collected (app/audits/polling.py).

``freeze`` moves every object alive at that moment (the zygote's imports) to the permanent generation, so that no
collection in the zygote or in a child forked from it walks them again (gc.freeze's documented use before fork: it
also spares the children the copy-on-write of pages a collection would touch). It collects nothing later than
before: objects made after it are collected as ever; the frozen ones were alive when it ran."""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 10)


def pace() -> None:
    """The test process's thresholds."""
    gc.set_threshold(*THRESHOLDS)


def freeze() -> None:
    """What is alive now, out of every later collection (the zygote, before it forks)."""
    gc.collect()
    gc.freeze()
