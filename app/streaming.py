"""Streamed exports: JSON lines and CSV produced row by row, so a response never holds a whole table in memory.
The forget set, coverage records and dynamics strings are all written here: this is the service's only CSV writer.

Spreadsheet safety (one rule, applied here to every CSV the service writes): a text cell that starts with ``=``,
``+``, ``-``, ``@``, a tab or a carriage return gets a leading apostrophe (OWASP's rule against CSV/formula
injection), so that a spreadsheet shows it as text instead of running it as a formula. Numbers are written as they
are. The input is not refused (a value may really start with ``-``); JSON lines and tofu carry the values as
stored."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any

from fastapi.responses import StreamingResponse

END_KEY = "_end"  # the last line of a complete jsonl export: {"_end": {"records": N}}
MEDIA_TYPES = {"jsonl": "application/x-ndjson", "csv": "text/csv"}
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: Any) -> Any:
    """A text that a spreadsheet would read as a formula, prefixed with an apostrophe; anything else unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def jsonl_lines(rows: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(row, ensure_ascii=False) + "\n"


def csv_lines(rows: Iterable[Mapping[str, Any]], fields: Sequence[str]) -> Iterator[str]:
    """The header, then one line per row: each row holds exactly ``fields`` (flatten nested values first)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(fields))
    writer.writeheader()
    for row in rows:
        writer.writerow({field: spreadsheet_safe(value) for field, value in row.items()})
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    if buf.getvalue():  # no rows: the header alone
        yield buf.getvalue()


def with_end_marker(lines: Iterator[str], extra: Callable[[], Mapping[str, Any]] | None = None) -> Iterator[str]:
    """A last line ``{"_end": {"records": N, ...}}`` once every record is out: a pipeline that does not find it
    took a cut stream. ``extra()``, asked once the records are out, adds what the export wants said (the forget
    set: facts left out as pending). (tofu and csv carry no marker, so that their loaders read them unchanged: a
    cut shows as an aborted HTTP response there.)"""
    n = 0
    for line in lines:
        n += 1
        yield line
    yield json.dumps({END_KEY: {"records": n} | dict(extra() if extra else {})}) + "\n"


def started(chunks: Iterator[str]) -> Iterator[str]:
    """Run the stream up to its first chunk now, so that its query has run (and failed, if it fails) before the
    answer's status is sent; an error after that cuts the response (app.middleware.ErrorScrubber)."""
    first = next(chunks, None)
    return chain(() if first is None else (first,), chunks)


def download(chunks: Iterator[str], media_type: str, filename: str) -> StreamingResponse:
    """A streamed attachment whose first chunk is already computed (a failing query is a 4xx/5xx, not a cut
    200); an error later aborts the response."""
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    return StreamingResponse(started(chunks), media_type=media_type, headers=headers)
