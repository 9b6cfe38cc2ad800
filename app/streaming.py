"""Streamed exports: JSON lines and CSV produced row by row, so a response never holds a whole table in memory.
The forget set, coverage records and dynamics strings are all written here."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from fastapi.responses import StreamingResponse

MEDIA_TYPES = {"jsonl": "application/x-ndjson", "csv": "text/csv"}


def jsonl_lines(rows: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(row, ensure_ascii=False) + "\n"


def csv_lines(rows: Iterable[Mapping[str, Any]], fields: Sequence[str]) -> Iterator[str]:
    """The header, then one line per row: each row holds exactly ``fields`` (flatten nested values first)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(fields))
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    if buf.getvalue():  # no rows: the header alone
        yield buf.getvalue()


def download(chunks: Iterator[str], media_type: str, filename: str) -> StreamingResponse:
    """A streamed attachment."""
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    return StreamingResponse(chunks, media_type=media_type, headers=headers)
