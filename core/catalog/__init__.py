"""The property catalog: human-related Wikidata properties, their canary templates and counterfactual pools.

One JSON file per property lives in ``data/properties/<PID>.json``. Pure Python: no DB, no torch.
A template holds exactly one ``{subject}`` and one ``{value}`` slot (WikiMem's (h, p, v) canary);
values of one ``value_type`` are type-consistent counterfactuals of each other.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from core.catalog.pools import generate_pool, native_precision, on_native_grid
from core.catalog.values import (
    ValueProblem,
    normalize_value,
    parse_quantity,
    precision_of,
    validate_for_datatype,
    value_key,
)

DATA_DIR = Path(__file__).resolve().parent / "data" / "properties"
SUBJECT_SLOT = "{subject}"
VALUE_SLOT = "{value}"
DATATYPES = ("wikibase-item", "string", "quantity", "time")
RELATIONS = ("copular", "possessive", "transitive")
_SLOT_RE = re.compile(r"(\{subject\}|\{value\})")


class UnknownProperty(KeyError):
    """A property id that is not in the catalog."""

    def __init__(self, pid: str) -> None:
        super().__init__(pid)
        self.pid = pid

    def __str__(self) -> str:
        return f"property {self.pid!r} is not in the catalog"


class CatalogError(ValueError):
    """A malformed catalog data file (a bug in the repository, not user input)."""


@dataclass(frozen=True)
class Property:
    pid: str
    label: str
    description: str
    aliases: tuple[str, ...]
    datatype: str
    value_type: str
    relation: str
    templates: tuple[str, ...]
    question: str
    pool: tuple[str, ...]
    # the generator's parameters when the pool is generated (dates, years, quantities), to redraw it at the
    # truth's precision; None for listed pools and pools imported from a dump
    pool_generator: dict | None = field(default=None, repr=False, compare=False)
    # the GDPR's special categories of personal data (Art. 9(1); criminal convictions: Art. 10) this property's
    # values fall under, where a false value harms most (SPECIAL_CATEGORIES); None for the others
    special_category: str | None = None
    _parts: tuple[tuple[str, ...], ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = tuple(_slots(t) for t in self.templates)
        object.__setattr__(self, "_parts", parts)

    @property
    def baseline(self) -> str:
        return self.templates[0]

    def render(self, template_index: int, subject: str, value: str) -> str:
        prefix, continuation = self.split(template_index, subject, value)
        return prefix + continuation

    def split(self, template_index: int, subject: str, value: str) -> tuple[str, str]:
        """(prefix up to the value, continuation = value + rest of the sentence); see :func:`split_parts`."""
        return split_parts(self._parts[template_index], subject, value)

    def validate_value(self, value: str) -> str | None:
        """None if ``value`` fits the datatype, else a message for a 422 (never echoes the value)."""
        return validate_for_datatype(self.datatype, self.value_type, value)

    def normalize(self, value: str) -> str:
        """The catalog's spelling of ``value`` ('1879-03-14' -> '14 March 1879', '196 cm' -> '196 centimetres');
        raises ValueProblem (a message for a 422) when it does not fit the datatype."""
        return normalize_value(self.datatype, self.value_type, value)

    def value_key(self, value: str) -> tuple:
        """What the value means, for equality (a quantity's amount, a date and its precision, a label)."""
        return value_key(self.datatype, self.value_type, value)

    def pool_for(self, truths: Sequence[str]) -> tuple[str, ...]:
        """The pool in the format and precision of the (first) true value, for dates and quantities: a generated
        pool is redrawn at the truth's precision unless the truth lies on its native grid; a listed or imported
        pool keeps the values of the truth's precision (all of them when none has it). Other datatypes: the pool."""
        if self.datatype not in ("quantity", "time") or not truths:
            return self.pool
        precision = precision_of(self.datatype, self.value_type, truths[0])
        if precision is None:
            return self.pool
        if self.pool_generator is not None:
            if self._native(truths[0], precision):
                return self.pool
            return tuple(dict.fromkeys(generate_pool(self.pool_generator, precision)))
        same = tuple(v for v in self.pool if precision_of(self.datatype, self.value_type, v) == precision)
        return same or self.pool

    def holds(self, truths: Sequence[str]) -> bool:
        """Whether every true value is a value of the counterfactual pool (compared by meaning). A generated pool
        (dates, quantities) holds every value of its form: it is redrawn at the truth's precision. A true value
        outside a listed pool differs from the counterfactuals in form (a small town among capitals), which a
        null of pool values does not cover."""
        if self.pool_generator is not None:
            return True
        pool = {self.value_key(v) for v in self.pool_for(truths)}
        return all(self.value_key(t) in pool for t in truths)

    def _native(self, truth: str, precision: str | int) -> bool:
        params = self.pool_generator or {}
        if params.get("kind") == "quantity":
            return on_native_grid(params, parse_quantity(self.value_type, truth).amount)
        return precision == native_precision(params)


def split_parts(parts: Sequence[str], subject: str, value: str) -> tuple[str, str]:
    """Fill a template already cut at its slots; (prefix up to the value, value + rest).

    Slots are substituted segment by segment, so braces inside a name or value are never re-interpreted.
    A sentence that starts with the value gets its first letter capitalized (sentence case).
    """
    prefix: list[str] = []
    rest: list[str] = []
    target = prefix
    for part in parts:
        if part == VALUE_SLOT:
            target = rest
            rest.append(value)
        elif part == SUBJECT_SLOT:
            target.append(subject)
        else:
            target.append(part)
    head, tail = "".join(prefix), "".join(rest)
    if not head and tail:
        tail = tail[0].upper() + tail[1:]
    return head, tail


def split_template(template: str, subject: str, value: str) -> tuple[str, str]:
    """:func:`split_parts` for a template string (e.g. a contextualized canary built at audit time)."""
    return split_parts(_slots(template), subject, value)


@cache
def _slots(template: str) -> tuple[str, ...]:
    """A template cut at its slots (the same few templates fill every sentence of an audit)."""
    return tuple(_SLOT_RE.split(template))


class Catalog:
    def __init__(self, properties: Sequence[Property]) -> None:
        self._by_pid = {p.pid: p for p in properties}
        if len(self._by_pid) != len(properties):
            raise CatalogError("duplicate property ids in the catalog")

    def get(self, pid: str) -> Property:
        try:
            return self._by_pid[pid]
        except KeyError:
            raise UnknownProperty(pid) from None

    def __contains__(self, pid: object) -> bool:
        return pid in self._by_pid

    def __iter__(self) -> Iterator[Property]:
        return iter(self._by_pid[pid] for pid in self.pids)

    def __len__(self) -> int:
        return len(self._by_pid)

    @property
    def pids(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_pid, key=lambda p: int(p[1:])))


def _check_template(pid: str, template: str) -> None:
    if template.count(SUBJECT_SLOT) != 1 or template.count(VALUE_SLOT) != 1:
        raise CatalogError(f"{pid}: template {template!r} needs exactly one {{subject}} and one {{value}}")
    leftover = _SLOT_RE.sub("", template)
    if "{" in leftover or "}" in leftover:
        raise CatalogError(f"{pid}: template {template!r} has an unknown slot")


# GDPR Art. 9(1)'s special categories of personal data, and Art. 10's criminal convictions and offences
SPECIAL_CATEGORIES = (
    "racial or ethnic origin",
    "political opinions",
    "religious or philosophical beliefs",
    "trade union membership",
    "health",
    "sex life or sexual orientation",
    "criminal convictions and offences",
)


def property_from_dict(raw: dict) -> Property:
    pid = raw["pid"]
    if not re.fullmatch(r"P[1-9][0-9]*", pid):
        raise CatalogError(f"bad property id {pid!r}")
    if raw["datatype"] not in DATATYPES or raw["relation"] not in RELATIONS:
        raise CatalogError(f"{pid}: bad datatype or relation")
    for template in raw["templates"]:
        _check_template(pid, template)
    # dict.fromkeys drops repeats and keeps the file's order
    pool = tuple(dict.fromkeys(raw["pool"])) if "pool" in raw else tuple(generate_pool(raw["pool_generator"]))
    return Property(
        pid=pid,
        label=raw["label"],
        description=raw.get("description", ""),
        aliases=tuple(raw.get("aliases", ())),
        datatype=raw["datatype"],
        value_type=raw["value_type"],
        relation=raw["relation"],
        templates=tuple(raw["templates"]),
        question=raw["question"],
        pool=pool,
        pool_generator=None if "pool" in raw else dict(raw["pool_generator"]),
        special_category=_special_category(pid, raw.get("special_category")),
    )


def _special_category(pid: str, category: str | None) -> str | None:
    if category is not None and category not in SPECIAL_CATEGORIES:
        raise CatalogError(f"{pid}: special_category is one of {', '.join(SPECIAL_CATEGORIES)}")
    return category


def load_from_dir(directory: Path) -> Catalog:
    props = []
    for path in sorted(directory.glob("P*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("pid") != path.stem:
            raise CatalogError(f"{path.name}: pid field does not match the file name")
        props.append(property_from_dict(raw))
    return Catalog(props)


@cache
def load_catalog() -> Catalog:
    return load_from_dir(DATA_DIR)


def counterfactuals(prop: Property, ground_truths: Sequence[str], n: int, seed: int) -> list[str]:
    """n values of the truth's pool (:meth:`Property.pool_for`) that are not ground truths, compared by what they
    mean (:meth:`Property.value_key`: '196 cm' excludes '196 centimetres', '1879-03-14' excludes
    '14 March 1879'; labels case-insensitively); deterministic given seed.

    Returns every eligible value (in pool order) when the pool holds n or fewer.
    """
    truths = {prop.value_key(g) for g in ground_truths}
    eligible = [v for v in prop.pool_for(ground_truths) if prop.value_key(v) not in truths]
    if n >= len(eligible):
        return eligible
    # Seeded by (seed, pid) so two properties sharing a pool do not draw the same values for one subject.
    rng = random.Random(f"{seed}:{prop.pid}")
    return rng.sample(eligible, n)


__all__ = [
    "Catalog",
    "CatalogError",
    "Property",
    "UnknownProperty",
    "ValueProblem",
    "counterfactuals",
    "load_catalog",
    "split_template",
]
