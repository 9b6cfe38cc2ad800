"""Rosters: the people of a batch, from JSON rows, a CSV file or a JSON-lines file, validated row by row.

Every row is checked up front against the rules of a single subject audit (app.subjects.service.normalize_name /
normalize_fact), plus what only a roster can get wrong: duplicate people, spreadsheet formulas in a cell, unknown
columns. Errors name the row (1-based, in the roster's own order: the CSV's data rows after its header, the JSON
array's items, the JSON-lines file's lines) and the field, never the value: names and facts are personal data.

Accepted row shapes (JSON item or JSON-lines line)::

    {"name": "Ada Lovelace", "wikidata_id": "Q7259", "facts": [{"property": "P106", "value": "mathematician"}]}
    {"name": "Ada Lovelace", "P106": "mathematician", "P27": ["United Kingdom"]}

CSV: a header row; columns ``name``, ``wikidata_id`` (optional), property ids (``P106``: the cell is the value;
a column may repeat for several values), and ``fact`` columns (``fact``, ``fact2``, …) whose cells read
``P106=mathematician``. Empty cells are skipped.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from app.errors import InvalidInput
from app.settings import Settings
from app.subjects.schemas import Person
from app.subjects.service import normalize_fact, normalize_name
from core.catalog import Catalog, load_catalog

PID = re.compile(r"^P[1-9][0-9]{0,9}$")
QID = re.compile(r"^Q[1-9][0-9]{0,11}$")
FACT_COLUMN = re.compile(r"^facts?[0-9]{0,3}$")
# Cells a spreadsheet would run as a formula (CSV injection, OWASP): refused wherever they come from, since the
# values end up in CSV exports of the forget set.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
MAX_COLUMNS = 200
MAX_ERRORS_SHOWN = 1000
MAX_ITEMS_PER_ROW = 1000  # facts and problems one row may hold as read (each costs memory before validation)


class RosterTooLarge(Exception):
    """More rows than the batch size limit; the caller answers with the quota's 429."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


@dataclass(frozen=True)
class RowError:
    row: int  # 0: the roster as a whole (its header, its encoding)
    field: str
    message: str


@dataclass
class RawRow:
    """A row as read, before validation: ``facts`` holds (field name for errors, property id, value)."""

    row: int
    name: Any = None
    wikidata_id: Any = None
    facts: list[tuple[str, Any, Any]] = field(default_factory=list)
    problems: list[RowError] = field(default_factory=list)
    unreadable: bool = False  # not a person at all (not an object, not JSON): its problems say all
    overflow: bool = False

    def full(self) -> bool:
        """True past MAX_ITEMS_PER_ROW facts and problems: the reader stops there (a 24 MiB body of one person's
        facts would otherwise become millions of tuples before the per-subject fact limit is checked)."""
        if len(self.facts) + len(self.problems) < MAX_ITEMS_PER_ROW:
            return False
        if not self.overflow:
            self.overflow = True
            self.problems.append(RowError(self.row, "facts", f"more than {MAX_ITEMS_PER_ROW} facts; send fewer"))
        return True


@dataclass
class Roster:
    rows: int = 0
    people: list[Person] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    rejected_rows: int = 0

    def add_error(self, error: RowError) -> None:
        if len(self.errors) < MAX_ERRORS_SHOWN:
            self.errors.append(error)


# -- reading ---------------------------------------------------------------------------------------------------
def rows_from_json(items: Iterable[Any], start: int = 1) -> Iterator[RawRow]:
    for i, item in enumerate(items, start):
        yield _raw_from_object(i, item)


def _raw_from_object(row: int, item: Any) -> RawRow:
    raw = RawRow(row)
    if not isinstance(item, dict):
        raw.problems.append(RowError(row, "row", "each person must be an object with name and facts"))
        raw.unreadable = True
        return raw
    for key, value in item.items():
        if raw.full():
            break
        if key == "name":
            raw.name = value
        elif key == "wikidata_id":
            raw.wikidata_id = value
        elif key == "facts":
            if not isinstance(value, list):
                raw.problems.append(RowError(row, "facts", "facts must be a list of {property, value}"))
                continue
            for j, fact in enumerate(value):
                if raw.full():
                    break
                ok = isinstance(fact, dict) and set(fact) == {"property", "value"}
                if not ok:
                    raw.problems.append(RowError(row, f"facts[{j}]", "a fact is {property, value}"))
                    continue
                raw.facts.append((f"facts[{j}]", fact["property"], fact["value"]))
        elif isinstance(key, str) and PID.match(key):
            for j, value_j in enumerate(value if isinstance(value, list) else [value]):
                if raw.full():
                    break
                raw.facts.append((f"{key}[{j}]", key, value_j))
        else:  # an unknown key is the client's input: name its position, not the key itself
            raw.problems.append(RowError(row, "row", "unknown field: use name, wikidata_id, facts or property ids"))
    return raw


def rows_from_jsonl(text: str) -> Iterator[RawRow]:
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: a line of `[[[[…`
            yield RawRow(line_no, problems=[RowError(line_no, "row", "not a JSON object")], unreadable=True)
            continue
        yield _raw_from_object(line_no, item)


def rows_from_csv(text: str) -> Iterator[RawRow]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        yield from _csv_rows(reader)
    except csv.Error as exc:  # its message names the problem (a cell over the size limit, a NUL), never a value
        raise InvalidInput(
            "roster",
            f"the CSV file cannot be read at line {reader.line_num} ({exc}); "
            "fix that line (a cell may be too long or hold a stray quote)",
        ) from None


def _csv_rows(reader: Any) -> Iterator[RawRow]:  # csv's reader type is private
    header = next(reader, None)
    if header is None:
        raise InvalidInput("roster", "the CSV file is empty; send a header row (name, P106, …) and one row per person")
    columns = _columns(header)
    for i, cells in enumerate(reader, 1):
        if not any(c.strip() for c in cells):
            continue
        raw = RawRow(i)
        if len(cells) > len(columns):
            raw.problems.append(RowError(i, f"column {len(columns) + 1}", "more cells than the header has columns"))
        for (kind, name), cell in zip(columns, cells, strict=False):
            if not cell.strip() and kind != "name":
                continue
            if kind == "name":
                raw.name = cell
            elif kind == "wikidata_id":
                raw.wikidata_id = cell
            elif kind == "property":
                raw.facts.append((name, name, cell))
            else:  # a fact cell: P106=value
                pid, sep, value = cell.partition("=")
                if not sep or not PID.match(pid.strip()):
                    raw.problems.append(RowError(i, name, "a fact cell reads P106=value (a property id, '=', value)"))
                    continue
                raw.facts.append((name, pid.strip(), value))
        yield raw


def _columns(header: list[str]) -> list[tuple[str, str]]:
    if len(header) > MAX_COLUMNS:
        raise InvalidInput("roster", f"the CSV header has more than {MAX_COLUMNS} columns")
    out = []
    for j, raw in enumerate(header, 1):
        name = raw.strip().lstrip("\ufeff")
        if name in ("name", "wikidata_id"):
            out.append((name, name))
        elif PID.match(name):
            out.append(("property", name))
        elif FACT_COLUMN.match(name):
            out.append(("fact", name))
        else:
            raise InvalidInput(f"column {j}", "unknown CSV column: use name, wikidata_id, property ids (P106) or fact")
    if ("name", "name") not in out:
        raise InvalidInput("roster", "the CSV header has no name column")
    return out


def rows_from_file(data: bytes, filename: str | None) -> Iterator[RawRow]:
    """An uploaded roster: JSON lines (.jsonl, .ndjson, or text starting with an object) or CSV. A binary file
    (NUL bytes, invalid UTF-8) is refused before any row is read."""
    if b"\x00" in data:
        raise InvalidInput("roster", "the roster is a binary file; send a CSV or JSON-lines text file (UTF-8)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInput("roster", "the roster is not UTF-8 text; save it as UTF-8 CSV or JSON lines") from None
    name = (filename or "").lower()
    if name.endswith((".jsonl", ".ndjson")) or (not name.endswith(".csv") and text.lstrip().startswith("{")):
        return rows_from_jsonl(text)
    return rows_from_csv(text)


# -- validating ------------------------------------------------------------------------------------------------
def validate(rows: Iterable[RawRow], settings: Settings, max_rows: int) -> Roster:
    """Every row checked; the valid ones as people. Raises RosterTooLarge past ``max_rows`` rows."""
    roster, seen = Roster(), _Seen()
    catalog = load_catalog()
    for raw in rows:
        roster.rows += 1
        if roster.rows > max_rows:
            raise RosterTooLarge(max_rows)
        person, errors = _validate_row(raw, catalog, settings)
        if person is not None:
            earlier = seen.duplicate_of(person)
            if earlier is not None:
                person, errors = None, [RowError(raw.row, "row", f"the same person as row {earlier}; list each once")]
        for error in errors:
            roster.add_error(error)
        if person is None:
            roster.rejected_rows += 1
        else:
            roster.people.append(person)
    return roster


class _Seen:
    """Duplicates: the same Wikidata id twice, or the same name (case aside) with the same facts."""

    def __init__(self) -> None:
        self._by_key: dict[object, int] = {}

    def duplicate_of(self, person: Person) -> int | None:
        keys: list[object] = [("facts", person.name.casefold(), frozenset(person.facts))]
        if person.wikidata_id is not None:
            keys.append(("qid", person.wikidata_id))
        for key in keys:
            if key in self._by_key:
                return self._by_key[key]
        for key in keys:
            self._by_key[key] = person.row
        return None


def _formula(value: str) -> bool:
    return value.startswith(FORMULA_START)


def _validate_row(raw: RawRow, catalog: Catalog, settings: Settings) -> tuple[Person | None, list[RowError]]:
    errors = list(raw.problems)
    if raw.unreadable:
        return None, errors
    name = _check_name(raw, settings, errors)
    qid = _check_qid(raw, errors)
    facts = _check_facts(raw, catalog, settings, errors)
    if errors or name is None:
        return None, errors
    return Person(raw.row, name, qid, tuple(facts)), errors


def _check_qid(raw: RawRow, errors: list[RowError]) -> str | None:
    given = raw.wikidata_id
    if given is None or (isinstance(given, str) and not given.strip()):
        return None
    qid = given.strip() if isinstance(given, str) else ""
    if not QID.match(qid):
        errors.append(RowError(raw.row, "wikidata_id", "a Wikidata id reads Q followed by digits (e.g. Q937)"))
        return None
    return qid


def _check_name(raw: RawRow, settings: Settings, errors: list[RowError]) -> str | None:
    if not isinstance(raw.name, str):
        errors.append(RowError(raw.row, "name", "give the person's name (a text)"))
        return None
    if _formula(raw.name.strip()):
        errors.append(RowError(raw.row, "name", "starts with =, +, -, @ (a spreadsheet formula); remove it"))
        return None
    try:
        return normalize_name(raw.name, settings, "name")
    except InvalidInput as exc:
        errors.append(RowError(raw.row, "name", exc.message))
        return None


def _check_facts(raw: RawRow, catalog: Catalog, settings: Settings, errors: list[RowError]) -> list[tuple[str, str]]:
    if not raw.facts and not raw.problems:
        errors.append(RowError(raw.row, "facts", "give at least one fact (a property id and its value)"))
    if len(raw.facts) > settings.max_facts_per_subject:
        errors.append(RowError(raw.row, "facts", f"more than {settings.max_facts_per_subject} facts; send fewer"))
        return []
    out: dict[tuple[str, str], None] = {}
    for where, pid, value in raw.facts:
        if not isinstance(pid, str) or not isinstance(value, str):
            errors.append(RowError(raw.row, where, "a fact's property and value are texts"))
            continue
        if _formula(value.strip()):
            errors.append(RowError(raw.row, where, "starts with =, +, -, @ (a spreadsheet formula); remove it"))
            continue
        try:
            out.setdefault(normalize_fact(catalog, pid.strip(), value, where, settings))
        except InvalidInput as exc:
            errors.append(RowError(raw.row, exc.field or where, exc.message))
    return list(out)
