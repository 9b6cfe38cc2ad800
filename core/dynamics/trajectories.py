"""Imported training trajectories: a provider's own per-string losses, read from JSONL or CSV and validated.

Schema (the same fields in both formats; one row per string and epoch, in any order):

    string_id     str    the provider's id of the string (never its text)
    epoch         int    >= 0; every string must have the same set of epochs
    train_loss    float  per-token loss (nats/token) of the string in the run(s) that trained on it
    heldout_loss  float  per-token loss (nats/token) of the string in the run that held it out
    frequency     float  optional, >= 0: how often the string occurs in the training set (same on every row)

JSONL: one object per line with those keys (blank lines skipped). CSV: a header row naming those columns.
Losses must be finite and non-negative. Error messages cite line numbers and counts, never a string id, since ids may
carry personal data.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from core.measures.dynamics import Trajectories

REQUIRED = ("string_id", "epoch", "train_loss", "heldout_loss")
FORMATS = ("jsonl", "csv")


class TrajectoryError(ValueError):
    """A trajectory file that cannot be used; ``line`` is 1-based where one line is to blame."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message if line is None else f"line {line}: {message}")
        self.line = line


@dataclass
class _Row:
    line: int
    string_id: str
    epoch: int
    train_loss: float
    heldout_loss: float
    frequency: float | None


def _jsonl_records(lines: Iterable[str]) -> Iterator[tuple[int, dict]]:
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TrajectoryError(f"not valid JSON ({exc.msg})", number) from None
        if not isinstance(record, dict):
            raise TrajectoryError("each line must be a JSON object", number)
        yield number, record


def _csv_records(lines: Iterable[str]) -> Iterator[tuple[int, dict]]:
    reader = csv.DictReader(lines)
    if reader.fieldnames is None:
        raise TrajectoryError("the CSV file is empty (no header row)")
    missing = [c for c in REQUIRED if c not in reader.fieldnames]
    if missing:
        raise TrajectoryError(f"the CSV header lacks column(s) {', '.join(missing)}", 1)
    for record in reader:
        yield reader.line_num, record


def _number(record: dict, key: str, line: int, integer: bool = False) -> float:
    value = record.get(key)
    if value is None or value == "":
        raise TrajectoryError(f"missing {key}", line)
    try:
        number = int(value) if integer else float(value)
    except (TypeError, ValueError):
        raise TrajectoryError(f"{key} must be {'an integer' if integer else 'a number'}", line) from None
    if isinstance(value, bool) or (integer and isinstance(value, float) and not value.is_integer()):
        raise TrajectoryError(f"{key} must be {'an integer' if integer else 'a number'}", line)
    if not math.isfinite(number) or number < 0:
        raise TrajectoryError(f"{key} must be finite and non-negative", line)
    return number


def _row(line: int, record: dict) -> _Row:
    missing = [k for k in REQUIRED if record.get(k) in (None, "")]
    if missing:
        raise TrajectoryError(f"missing field(s) {', '.join(missing)}", line)
    sid = record["string_id"]
    if not isinstance(sid, str | int) or isinstance(sid, bool):
        raise TrajectoryError("string_id must be a string", line)
    freq = record.get("frequency")
    return _Row(
        line=line,
        string_id=str(sid),
        epoch=int(_number(record, "epoch", line, integer=True)),
        train_loss=_number(record, "train_loss", line),
        heldout_loss=_number(record, "heldout_loss", line),
        frequency=None if freq in (None, "") else _number(record, "frequency", line),
    )


def _collect(rows: Iterable[_Row]) -> tuple[dict[str, dict[int, _Row]], list[str]]:
    by_string: dict[str, dict[int, _Row]] = {}
    order: list[str] = []
    for row in rows:
        epochs = by_string.get(row.string_id)
        if epochs is None:
            epochs = by_string[row.string_id] = {}
            order.append(row.string_id)
        if row.epoch in epochs:
            raise TrajectoryError(f"a second row for the same string and epoch {row.epoch}", row.line)
        epochs[row.epoch] = row
    return by_string, order


def _check_complete(by_string: dict[str, dict[int, _Row]], order: list[str]) -> list[int]:
    epochs = sorted({e for rows in by_string.values() for e in rows})
    incomplete = [sid for sid in order if len(by_string[sid]) != len(epochs)]
    if incomplete:
        first = by_string[incomplete[0]]
        lacking = [e for e in epochs if e not in first]
        raise TrajectoryError(
            f"{len(incomplete)} string(s) lack some epochs (every string needs all {len(epochs)} epochs); the first "
            f"such string (line {min(r.line for r in first.values())}) lacks epoch(s) {lacking[:10]}"
        )
    return epochs


def _frequencies(by_string: dict[str, dict[int, _Row]], order: list[str]) -> list[float] | None:
    values = []
    for sid in order:
        seen = {r.frequency for r in by_string[sid].values()}
        if len(seen) > 1:
            line = min(r.line for r in by_string[sid].values())
            raise TrajectoryError("frequency differs between epochs of one string (first row at that line)", line)
        values.append(seen.pop())
    if all(v is None for v in values):
        return None
    if any(v is None for v in values):
        raise TrajectoryError("frequency is given for some strings but not for others")
    return values


def parse_trajectories(
    lines: Iterable[str],
    fmt: str,
    max_rows: int = 1_000_000,
    expected_ids: Iterable[str] | None = None,
) -> Trajectories:
    """Read and validate a trajectory file (``fmt`` = "jsonl" or "csv"); raises TrajectoryError."""
    if fmt not in FORMATS:
        raise TrajectoryError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    records = _jsonl_records(lines) if fmt == "jsonl" else _csv_records(lines)

    def rows() -> Iterator[_Row]:
        for count, (line, record) in enumerate(records, start=1):
            if count > max_rows:
                raise TrajectoryError(f"more than {max_rows} rows; split the file or raise the limit", line)
            yield _row(line, record)

    by_string, order = _collect(rows())
    if not order:
        raise TrajectoryError("no rows: the file holds no trajectories")
    epochs = _check_complete(by_string, order)
    if expected_ids is not None:
        expected = set(expected_ids)
        absent, extra = len(expected - set(order)), len(set(order) - expected)
        if absent or extra:
            raise TrajectoryError(f"{absent} expected string(s) have no rows and {extra} row string(s) are unknown")
    return Trajectories(
        string_ids=order,
        epochs=epochs,
        train_loss=np.array([[by_string[s][e].train_loss for e in epochs] for s in order], dtype=float),
        heldout_loss=np.array([[by_string[s][e].heldout_loss for e in epochs] for s in order], dtype=float),
        frequency=_frequencies(by_string, order),
    )


def write_trajectories(traj: Trajectories, fmt: str) -> Iterator[str]:
    """The inverse of parse_trajectories: lines of JSONL or CSV (with a header), each ending in a newline."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}")
    fields = [*REQUIRED, *(["frequency"] if traj.frequency is not None else [])]
    if fmt == "csv":
        yield ",".join(fields) + "\n"
    for s, sid in enumerate(traj.string_ids):
        for i, epoch in enumerate(traj.epochs):
            row = {
                "string_id": sid,
                "epoch": int(epoch),
                "train_loss": float(traj.train_loss[s, i]),
                "heldout_loss": float(traj.heldout_loss[s, i]),
            }
            if traj.frequency is not None:
                row["frequency"] = float(traj.frequency[s])
            yield json.dumps(row) + "\n" if fmt == "jsonl" else _csv_line([row[f] for f in fields])


def _csv_line(values: list) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(values)
    return buf.getvalue()
