"""Streaming parser for dataset files: MovieLens ``::`` ``.dat`` and CSV/TSV with a column mapping.

Files are read line by line from a binary stream and never held whole in memory. A malformed line
is counted, reported with its line number and a reason (never its content: user files hold personal
data), and skipped.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from app.coverage.formats import (
    DELIMITERS,
    REQUIRED_ROLES,
    ColumnMapping,
    DatasetError,
    FileFormat,
    Target,
    resolve_mapping,
    validate_mapping,
)

MAX_REPORTED_LINES = 100  # problems beyond this are counted, not listed
MAX_ID_LENGTH = 200  # the database column's width


@dataclass(frozen=True)
class Record:
    """One parsed line. ``fields`` are the mapped columns' values in the mapping's order."""

    line_no: int
    fields: tuple[str, ...]
    key: str
    user_id: str | None = None
    item_id: str | None = None
    timestamp: int | None = None


@dataclass
class ParseReport:
    """Counts for one file. ``problems`` lists (line number, reason) for the first problems found."""

    rows: int = 0
    malformed: int = 0
    unknown_references: int = 0
    problems: list[tuple[int, str]] = field(default_factory=list)
    mapping: ColumnMapping | None = None

    def add_problem(self, line_no: int, reason: str, *, unknown_reference: bool = False) -> None:
        if unknown_reference:
            self.unknown_references += 1
        else:
            self.malformed += 1
        if len(self.problems) < MAX_REPORTED_LINES:
            self.problems.append((line_no, reason))


def decode_line(raw: bytes) -> str:
    """UTF-8, falling back to Latin-1: MovieLens-1M's movies.dat is Latin-1 encoded ("Misérables")."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return unicodedata.normalize("NFC", text.rstrip("\r\n"))


def format_line(fields: Iterable[str], fmt: FileFormat) -> str:
    """Write a record back in its file's own format (CSV quoting included)."""
    values = list(fields)
    if fmt == "movielens":
        return "::".join(values)
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=DELIMITERS[fmt], lineterminator="").writerow(values)
    return buffer.getvalue()


def parse_file(
    lines: Iterable[bytes],
    target: Target,
    fmt: FileFormat,
    mapping: ColumnMapping | None,
    report: ParseReport,
    *,
    known_items: set[str] | None = None,
    known_users: set[str] | None = None,
) -> Iterator[Record]:
    """Yield the well-formed records of one file; fill ``report`` as a side effect.

    Raises :class:`DatasetError` for problems with the whole file (empty file, header that does not fit
    the mapping). ``report.rows`` counts the yielded records. With ``known_items``/``known_users``, a
    record naming an id outside them is reported (line number, reason) as an unknown reference and skipped.
    """
    if fmt == "movielens":
        if mapping is None:
            raise DatasetError("mapping", "a .dat file needs a column mapping")
        validate_mapping(target, mapping)
        report.mapping = mapping
        records = _parse_dat(lines, target, mapping, report)
    else:
        records = _parse_delimited(lines, target, fmt, mapping, report)
    for record in records:
        if _unknown_reference(record, known_items, known_users, report):
            continue
        report.rows += 1
        yield record
    if report.rows == 0:
        detail = f" ({report.malformed} malformed line(s))" if report.malformed else ""
        raise DatasetError(f"files.{target}", f"the {target} file has no valid records{detail}")


def _parse_dat(lines: Iterable[bytes], target: Target, mapping: ColumnMapping, report: ParseReport):
    width, layout = len(mapping.columns), _Layout.of(target, mapping)
    for line_no, raw in enumerate(lines, start=1):
        text = decode_line(raw)
        if not text.strip():
            continue  # blank lines (a trailing newline) are not records
        values = text.split("::")
        if len(values) != width:
            report.add_problem(line_no, f"expected {width} '::'-separated fields, found {len(values)}")
            continue
        record = _make_record(line_no, tuple(values), layout, report)
        if record is not None:
            yield record


def _parse_delimited(
    lines: Iterable[bytes],
    target: Target,
    fmt: FileFormat,
    mapping: ColumnMapping | None,
    report: ParseReport,
):
    texts = (decode_line(raw) for raw in lines)
    reader = csv.reader(texts, delimiter=DELIMITERS[fmt], strict=True)
    try:
        header = tuple(h.strip() for h in next(reader))
    except StopIteration:
        raise DatasetError(f"files.{target}", f"the {target} file is empty") from None
    except csv.Error as exc:
        raise DatasetError(f"files.{target}", f"the {target} file's header row is not valid: {exc}") from None
    if not any(header):
        raise DatasetError(f"files.{target}", f"the {target} file has an empty header row")
    resolved = resolve_mapping(target, mapping, header)
    report.mapping = resolved
    positions = [header.index(c) for c in resolved.columns]
    layout = _Layout.of(target, resolved)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            report.add_problem(reader.line_num, f"not valid {fmt.upper()}: {exc}")
            continue
        if not row or all(not v.strip() for v in row):
            continue
        if len(row) != len(header):
            report.add_problem(reader.line_num, f"expected {len(header)} columns, found {len(row)}")
            continue
        record = _make_record(reader.line_num, tuple(row[p] for p in positions), layout, report)
        if record is not None:
            yield record


@dataclass(frozen=True)
class _Layout:
    """Where each role sits in a mapped line; computed once per file, not per line."""

    key: int
    required: tuple[tuple[str, int], ...]
    user_id: int | None
    item_id: int | None
    timestamp: int | None
    strip: frozenset[int]

    @classmethod
    def of(cls, target: Target, mapping: ColumnMapping) -> _Layout:
        user, item, ts = (mapping.index_of(r) for r in ("user_id", "item_id", "timestamp"))
        required = tuple((role, mapping.index_of(role)) for role in REQUIRED_ROLES[target])
        return cls(required[0][1], required, user, item, ts, frozenset(i for i in (user, item, ts) if i is not None))


def _make_record(line_no: int, values: tuple[str, ...], layout: _Layout, report: ParseReport) -> Record | None:
    # ids are stored stripped, in the line too, so that the line starts with "<id><delimiter>"
    values = tuple(v.strip() if i in layout.strip else v for i, v in enumerate(values))
    for role, index in layout.required:
        reason = _bad_id(values[index])
        if reason:
            report.add_problem(line_no, f"{role} {reason}")
            return None
    timestamp = None
    if layout.timestamp is not None:
        try:
            timestamp = int(float(values[layout.timestamp]))
        except ValueError:
            report.add_problem(line_no, "timestamp is not a number")
            return None
    user = values[layout.user_id] if layout.user_id is not None else None
    item = values[layout.item_id] if layout.item_id is not None else None
    return Record(line_no, values, values[layout.key], user, item, timestamp)


def _bad_id(value: str) -> str | None:
    if not value:
        return "is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"is longer than {MAX_ID_LENGTH} characters"
    if any(c in value for c in ',\t"\n') or "::" in value:
        return "contains a delimiter or a quote"  # the prompt gives "<id><delimiter>": the id must be plain
    return None


@dataclass
class Popularity:
    """Interaction counts: per item (its popularity) and per user (their activity)."""

    items: Counter[str] = field(default_factory=Counter)
    users: Counter[str] = field(default_factory=Counter)

    def add(self, record: Record) -> None:
        if record.item_id is not None:
            self.items[record.item_id] += 1
        if record.user_id is not None:
            self.users[record.user_id] += 1


def _unknown_reference(
    record: Record, known_items: set[str] | None, known_users: set[str] | None, report: ParseReport
) -> bool:
    if known_items is not None and record.item_id is not None and record.item_id not in known_items:
        reason = "names an item that is not in the items file"
    elif known_users is not None and record.user_id is not None and record.user_id not in known_users:
        reason = "names a user that is not in the users file"
    else:
        return False
    report.add_problem(record.line_no, reason, unknown_reference=True)
    return True
