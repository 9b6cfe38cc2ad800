"""The order in which `make test`'s pytest-xdist processes take the test files: the longest first.

`--dist loadfile` hands whole files to the two processes in collection order (with `--no-loadscope-reorder`; by
default xdist puts the files with the most tests first, and those are the fast unit-test files, so the one-test
end-to-end files of a minute or more came last and one process ran them while the other had nothing left to take).
Longest first, the last files to start are short ones and both processes finish close together.

``DURATIONS`` (tests/durations.json) holds each file's seconds (setup, call and teardown summed) from a whole run.
Refresh it from a run's ``--durations=0`` output: ``python -m tests.support.schedule run.log``. A file it does not
name (a new one) goes first: it may be long, and a short file first costs little."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
DURATION_LINE = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+([^\s:]+)::", re.M)


def file_seconds(log: str) -> dict[str, float]:
    """Seconds per test file from pytest's ``--durations=0`` report, longest first."""
    out: dict[str, float] = {}
    for seconds, path in DURATION_LINE.findall(log):
        out[path] = out.get(path, 0.0) + float(seconds)
    return {path: round(s, 1) for path, s in sorted(out.items(), key=lambda kv: -kv[1])}


def longest_first(items: Sequence, durations: dict[str, float]) -> list:
    """``items`` (pytest items) with whole files in decreasing measured seconds, files not measured first; the tests
    of one file keep their order (module fixtures run once per file either way)."""
    paths = [item.nodeid.split("::")[0] for item in items]
    rank = {p: durations.get(p, float("inf")) for p in paths}
    first_seen = {p: i for i, p in reversed(list(enumerate(paths)))}
    order = sorted(range(len(items)), key=lambda i: (-rank[paths[i]], first_seen[paths[i]], i))
    return [items[i] for i in order]


def load_durations() -> dict[str, float]:
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.support.schedule <pytest output with --durations=0>", file=sys.stderr)
        return 2
    durations = file_seconds(Path(argv[0]).read_text())
    DURATIONS.write_text(json.dumps(durations, indent=1) + "\n")
    print(f"{DURATIONS}: {len(durations)} files, {sum(durations.values()):.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
