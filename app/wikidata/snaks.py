"""Wikidata's JSON entity format, shared by the API client and the dump reader.

Both ``wbgetentities`` and the JSON dumps serialize an entity the same way: ``labels``, ``aliases``, ``claims``
(pid -> statements with a ``mainsnak`` and a ``rank``). This module turns statements into catalog-ready values.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from core.catalog.values import MONTHS, ValueProblem, parse_quantity

HUMAN = "Q5"
INSTANCE_OF = "P31"
LANGUAGES = ("en", "mul")  # "mul" holds language-independent labels (mostly names) since 2024

# Wikidata's unit items, spelled as the catalog's normaliser reads them; it converts to the catalog's unit
# (P2048 height in centimetres, P2067 mass in kilograms) and refuses units that do not fit the property.
METRE, CENTIMETRE, KILOGRAM = "Q11573", "Q174728", "Q11570"
UNIT_WORDS = {
    METRE: "metres",
    CENTIMETRE: "centimetres",
    "Q174789": "millimetres",
    "Q218593": "inches",
    "Q3710": "feet",
    KILOGRAM: "kilograms",
    "Q41803": "grams",
    "Q100995": "pounds",
}
_TIME_RE = re.compile(r"^([+-])(\d+)-(\d{2})-(\d{2})T")


@dataclass(frozen=True)
class ItemRef:
    """A claim whose value is another item; its label is resolved later (second API call or dump pass)."""

    qid: str


Value = ItemRef | str


def entity_label(entity: dict) -> str | None:
    labels = entity.get("labels") or {}
    for lang in LANGUAGES:
        if lang in labels and labels[lang].get("value"):
            return labels[lang]["value"]
    return None


def entity_aliases(entity: dict, lang: str = "en") -> list[str]:
    return [a["value"] for a in (entity.get("aliases") or {}).get(lang, []) if a.get("value")]


def entity_description(entity: dict, lang: str = "en") -> str:
    return ((entity.get("descriptions") or {}).get(lang) or {}).get("value", "")


def truthy_statements(statements: list[dict]) -> list[dict]:
    """Wikidata's 'truthy' statements: the preferred ones if any, else the normal ones; never deprecated."""
    preferred = [s for s in statements if s.get("rank") == "preferred"]
    return preferred or [s for s in statements if s.get("rank", "normal") == "normal"]


def is_human(entity: dict) -> bool:
    return any(v == ItemRef(HUMAN) for v in statement_values(entity.get("claims") or {}, INSTANCE_OF, ""))


def statement_values(claims: dict, pid: str, value_type: str) -> Iterator[Value]:
    for statement in truthy_statements(claims.get(pid) or []):
        value = snak_value((statement or {}).get("mainsnak") or {}, value_type)
        if value is not None:
            yield value


def claim_values(claims: dict, pids: Collection[str], value_types: dict[str, str]) -> list[tuple[str, Value]]:
    """(pid, value) for every truthy statement of the given properties, in pid order, repeats dropped."""
    out: list[tuple[str, Value]] = []
    for pid in sorted(set(claims) & set(pids), key=lambda p: int(p[1:])):
        for value in dict.fromkeys(statement_values(claims, pid, value_types.get(pid, ""))):
            out.append((pid, value))
    return out


def snak_value(snak: dict, value_type: str) -> Value | None:
    """The value of a main snak; None for 'no value', 'unknown value' and types the catalog does not use."""
    if snak.get("snaktype") != "value":
        return None
    datavalue = snak.get("datavalue") or {}
    kind, raw = datavalue.get("type"), datavalue.get("value")
    if kind == "wikibase-entityid" and isinstance(raw, dict):
        qid = raw.get("id") or (f"Q{raw['numeric-id']}" if "numeric-id" in raw else None)
        return ItemRef(qid) if qid else None
    if kind == "string" and isinstance(raw, str):
        return raw
    if kind == "monolingualtext" and isinstance(raw, dict):
        return raw.get("text")
    if kind == "time" and isinstance(raw, dict):
        return format_time(raw)
    if kind == "quantity" and isinstance(raw, dict):
        return format_quantity(raw, value_type)
    return None


def format_time(raw: dict) -> str | None:
    """'+1952-03-11T00:00:00Z' at day precision (11) -> '11 March 1952'; month (10) -> 'March 1952'; year -> '1952'."""
    match = _TIME_RE.match(str(raw.get("time", "")))
    if not match:
        return None
    sign, year, month, day = match.group(1), int(match.group(2)), int(match.group(3)), int(match.group(4))
    precision = int(raw.get("precision", 11))
    era = " BCE" if sign == "-" else ""
    if precision >= 11 and 1 <= month <= 12 and day >= 1:
        return f"{day} {MONTHS[month - 1]} {year}{era}"
    if precision == 10 and 1 <= month <= 12:
        return f"{MONTHS[month - 1]} {year}{era}"
    if precision == 9:
        return f"{year}{era}"
    return None  # decades, centuries: too coarse to rank against day-precision counterfactuals


def format_quantity(raw: dict, value_type: str) -> str | None:
    """'+1.962' metres for a height -> '196.2 centimetres' (core.catalog.values.parse_quantity, the same
    normaliser the API uses); None for an amount or unit that does not fit the property."""
    try:
        amount = Decimal(str(raw.get("amount", "")))
    except InvalidOperation:
        return None
    unit_qid = str(raw.get("unit", "1")).rsplit("/", 1)[-1]
    word = "" if unit_qid == "1" else UNIT_WORDS.get(unit_qid)
    if word is None or (word == "" and value_type != "quantity:count"):
        return None  # a unit we cannot convert would not be type-consistent with the pool
    try:
        return parse_quantity(value_type, f"{_plain(amount)} {word}".strip()).label
    except ValueProblem:
        return None


def _plain(amount: Decimal) -> str:
    text = format(amount.normalize(), "f")
    return text.lstrip("+")
