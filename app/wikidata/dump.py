"""Stream Wikidata's official JSON dump (``.json``, ``.json.gz``, ``.json.bz2``) without loading it.

The dump is one JSON array with one entity per line (``[`` first, ``]`` last, every entity line but the last
ending in ``,``). Pass 1 (:meth:`DumpReader.humans`) yields humans (P31 = Q5) with their catalog facts and
collects property metadata and value counts; pass 2 (:meth:`DumpReader.labels`) re-reads the file for the labels
of the items those facts point to. A line that does not parse is counted with its line number and skipped.
Pure parsing: storing is the caller's business. Reports hold counts and line numbers only, never personal data.
"""

from __future__ import annotations

import bz2
import gzip
import json
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from app.wikidata.snaks import (
    ItemRef,
    Value,
    claim_values,
    entity_aliases,
    entity_description,
    entity_label,
    is_human,
)

MAX_BAD_LINE_NUMBERS = 1000  # keep the first ones; the count is always exact
MIN_HUMANS_FOR_POOL = 100  # WikiMem builds pools for properties used by at least this many humans


@dataclass
class DumpReport:
    lines: int = 0
    entities: int = 0
    humans: int = 0
    humans_without_label: int = 0
    properties: int = 0
    bad_lines: int = 0
    bad_line_numbers: list[int] = field(default_factory=list)
    truncated: bool = False  # the compressed stream ended early

    def record_bad(self, line_number: int) -> None:
        self.bad_lines += 1
        if len(self.bad_line_numbers) < MAX_BAD_LINE_NUMBERS:
            self.bad_line_numbers.append(line_number)


@dataclass(frozen=True)
class DumpHuman:
    qid: str
    name: str
    facts: tuple[tuple[str, Value], ...]
    line_number: int  # for resumable imports: the next run can start after it


@dataclass(frozen=True)
class DumpProperty:
    pid: str
    label: str
    description: str
    aliases: tuple[str, ...]
    datatype: str


def open_dump(path: str | Path) -> BinaryIO:
    name = str(path)
    if name.endswith(".gz"):
        return gzip.open(name, "rb")
    if name.endswith(".bz2"):
        return bz2.open(name, "rb")
    return open(name, "rb")  # noqa: SIM115 (the caller closes it)


def iter_entities(path: str | Path, report: DumpReport, start_line: int = 0) -> Iterator[tuple[int, dict]]:
    """(line number, entity) for every parseable entity line after ``start_line`` (1-based numbering)."""
    with open_dump(path) as stream:
        number = 0
        try:
            for number, raw in enumerate(stream, start=1):  # noqa: B007 (number is read after the loop)
                if number <= start_line:
                    continue
                report.lines += 1
                entity = _parse_line(raw)
                if entity is _SKIP:
                    continue
                if entity is None:
                    report.record_bad(number)
                    continue
                report.entities += 1
                yield number, entity
        except (EOFError, OSError, ValueError):
            # gzip/bz2 raise these when the file was cut short: count the broken tail once, stop cleanly
            report.truncated = True
            report.record_bad(number + 1)


_SKIP = object()


def _parse_line(raw: bytes) -> dict | object | None:
    text = raw.strip()
    if text in (b"[", b"]", b""):
        return _SKIP
    if text.endswith(b","):
        text = text[:-1]
    try:
        entity = json.loads(text)
    except ValueError:  # includes bad UTF-8 and truncated JSON
        return None
    if not isinstance(entity, dict) or not isinstance(entity.get("id"), str):
        return None
    return entity


class DumpReader:
    """Two streaming passes over one dump file; ``pids`` restricts facts to those properties (the catalog)."""

    def __init__(self, path: str | Path, pids: Collection[str], value_types: dict[str, str] | None = None) -> None:
        self.path = Path(path)
        self.pids = frozenset(pids)
        self.value_types = value_types or {}
        self.report = DumpReport()
        self.properties: dict[str, DumpProperty] = {}
        self.value_counts: dict[str, Counter[Value]] = {}  # pid -> value -> number of humans holding it
        self.humans_per_property: Counter[str] = Counter()

    def humans(self, start_line: int = 0) -> Iterator[DumpHuman]:
        for number, entity in iter_entities(self.path, self.report, start_line):
            if entity.get("type") == "property":
                self._add_property(entity)
            elif is_human(entity):
                human = self._human(number, entity)
                if human is not None:
                    yield human

    def _human(self, number: int, entity: dict) -> DumpHuman | None:
        self.report.humans += 1
        name = entity_label(entity)
        if not name:
            self.report.humans_without_label += 1
            return None
        facts = tuple(claim_values(entity.get("claims") or {}, self.pids, self.value_types))
        for pid in {p for p, _ in facts}:
            self.humans_per_property[pid] += 1
        for pid, value in set(facts):
            self.value_counts.setdefault(pid, Counter())[value] += 1
        return DumpHuman(qid=entity["id"], name=name, facts=facts, line_number=number)

    def _add_property(self, entity: dict) -> None:
        pid = entity["id"]
        if pid not in self.pids:
            return
        self.report.properties += 1
        self.properties[pid] = DumpProperty(
            pid=pid,
            label=entity_label(entity) or pid,
            description=entity_description(entity),
            aliases=tuple(entity_aliases(entity)),
            datatype=str(entity.get("datatype", "")),
        )

    def referenced_items(self) -> set[str]:
        return {v.qid for counts in self.value_counts.values() for v in counts if isinstance(v, ItemRef)}

    def labels(self, qids: Collection[str]) -> dict[str, str]:
        """Pass 2: English labels of the given items (bad lines were already counted in pass 1)."""
        wanted, found = set(qids), {}
        for _, entity in iter_entities(self.path, DumpReport()):
            if entity["id"] in wanted:
                label = entity_label(entity)
                if label:
                    found[entity["id"]] = label
        return found

    def pools(self, labels: dict[str, str], min_humans: int = MIN_HUMANS_FOR_POOL) -> dict[str, list[str]]:
        """Counterfactual pools as WikiMem builds them: every distinct value of each property used by at least
        ``min_humans`` humans, most frequent first. Item values without a label are left out."""
        pools: dict[str, list[str]] = {}
        for pid, counts in self.value_counts.items():
            if self.humans_per_property[pid] < min_humans:
                continue
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], _text(kv[0], labels) or ""))
            values = [t for v, _ in ranked if (t := _text(v, labels))]
            pools[pid] = list(dict.fromkeys(values))
        return pools


def _text(value: Value, labels: dict[str, str]) -> str | None:
    return labels.get(value.qid) if isinstance(value, ItemRef) else value


def resolve(facts: tuple[tuple[str, Value], ...], labels: dict[str, str]) -> list[tuple[str, str]]:
    """(pid, label) pairs; facts whose item has no label are dropped."""
    return [(pid, t) for pid, v in facts if (t := _text(v, labels))]
