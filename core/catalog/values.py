"""Value formats per Wikidata datatype: parsing, validating and normalising dates and quantities.

One normaliser for every way a value comes in (the API, the CLI, the Wikidata importer): a date becomes the
catalog's label at its own precision ('1879-03-14' -> '14 March 1879', 'March 1879', '1879'); a quantity becomes
a number in the catalog's unit ('196 cm', '1.962 m' -> '196.2 centimetres'). Values are compared by what they
mean (:func:`value_key`), never by their spelling, and never by embedding.

Messages never echo the value: a value may be personal data and messages end up in 422 bodies and logs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from functools import lru_cache

MAX_VALUE_LENGTH = 300
# Spelled out rather than calendar.month_name, which follows the process locale.
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_NUMBER = {m.casefold(): i + 1 for i, m in enumerate(MONTHS)} | {
    m[:3].casefold(): i + 1 for i, m in enumerate(MONTHS)
}
_ISO_RE = re.compile(r"^[+]?(\d{1,4})-(\d{2})-(\d{2})(T00:00:00Z)?$")
_ISO_MONTH_RE = re.compile(r"^[+]?(\d{1,4})-(\d{2})$")
_DMY_RE = re.compile(r"^(\d{1,2}) ([A-Za-z]+)\.?,? (\d{1,4})$")
_MDY_RE = re.compile(r"^([A-Za-z]+)\.? (\d{1,2}), (\d{1,4})$")
_MY_RE = re.compile(r"^([A-Za-z]+)\.? (\d{1,4})$")
_YEAR_RE = re.compile(r"^[+]?(\d{1,4})$")
# A number with at most one unit word ("178 centimetres", "72 kg"); "1984 Summer Olympics" is an item label.
_QUANTITY_RE = re.compile(r"^[+-]?\d[\d,]*(?:\.\d+)?(?:\s*[A-Za-z%°][A-Za-z%°./]*)?$")
_NUMBER_UNIT_RE = re.compile(r"^([+-]?\d[\d,]*(?:\.\d+)?)\s*(.*)$")

DATE_PRECISIONS = ("day", "month", "year")


class ValueProblem(ValueError):
    """A value that does not fit its property's datatype; the message names the fix, never the value."""


@dataclass(frozen=True)
class Unit:
    label: str  # how the catalog writes the unit ("centimetres"; "" for a count)
    factors: dict[str, Decimal]  # accepted spellings -> factor to the catalog unit
    # Conversions from non-decimal units (inch, pound) give long fractions; they are rounded to this many
    # decimals of the catalog unit (0.1 cm, 0.1 kg), finer than any recorded height or mass.
    inexact: frozenset[str] = frozenset()
    integer: bool = False
    minimum: Decimal = Decimal(0)


def _spellings(factor: str, *words: str) -> dict[str, Decimal]:
    return dict.fromkeys(words, Decimal(factor))


UNITS: dict[str, Unit] = {
    "quantity:height_cm": Unit(
        "centimetres",
        _spellings("1", "", "cm", "cms", "centimetre", "centimetres", "centimeter", "centimeters")
        | _spellings("100", "m", "metre", "metres", "meter", "meters")
        | _spellings("0.1", "mm", "millimetre", "millimetres", "millimeter", "millimeters")
        | _spellings("2.54", "in", "inch", "inches")
        | _spellings("30.48", "ft", "foot", "feet"),
        inexact=frozenset({"in", "inch", "inches", "ft", "foot", "feet"}),
    ),
    "quantity:mass_kg": Unit(
        "kilograms",
        _spellings("1", "", "kg", "kgs", "kilogram", "kilograms", "kilogramme", "kilogrammes", "kilo", "kilos")
        | _spellings("0.001", "g", "gram", "grams", "gramme", "grammes")
        | _spellings("0.45359237", "lb", "lbs", "pound", "pounds"),
        inexact=frozenset({"lb", "lbs", "pound", "pounds"}),
    ),
    "quantity:count": Unit("", {"": Decimal(1)}, integer=True),
}
INEXACT_DECIMALS = 1


@dataclass(frozen=True)
class Quantity:
    amount: Decimal  # in the catalog unit
    unit: str

    @property
    def decimals(self) -> int:
        """Digits after the decimal point of the normalised amount ('196.20' -> 1, '196' -> 0)."""
        exponent = self.amount.normalize().as_tuple().exponent
        return max(0, -exponent) if isinstance(exponent, int) else 0

    @property
    def label(self) -> str:
        return f"{format_amount(self.amount)} {self.unit}".strip()


@dataclass(frozen=True)
class TimeValue:
    year: int
    month: int | None = None
    day: int | None = None

    @property
    def precision(self) -> str:
        return "day" if self.day is not None else "month" if self.month is not None else "year"

    @property
    def label(self) -> str:
        if self.day is not None and self.month is not None:
            return format_date(date(self.year, self.month, self.day))
        if self.month is not None:
            return f"{MONTHS[self.month - 1]} {self.year}"
        return str(self.year)


def format_date(d: date) -> str:
    """The catalog's date label, e.g. '14 March 1879' (Wikidata's English rendering of a day date)."""
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def format_amount(amount: Decimal) -> str:
    """'196.20' -> '196.2', '1E+2' -> '100': trailing zeros carry no information and read unnaturally."""
    text = format(amount.normalize(), "f")
    return text.lstrip("+")


def parse_time_value(value: str) -> TimeValue | None:
    """A date at day, month or year precision, or None when the text is not a time value."""
    text = value.strip()
    if m := _ISO_RE.match(text):
        return _time(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if m := _ISO_MONTH_RE.match(text):
        return _time(int(m.group(1)), int(m.group(2)), None)
    if m := _DMY_RE.match(text):
        month = _MONTH_NUMBER.get(m.group(2).casefold())
        return _time(int(m.group(3)), month, int(m.group(1))) if month else None
    if m := _MDY_RE.match(text):
        month = _MONTH_NUMBER.get(m.group(1).casefold())
        return _time(int(m.group(3)), month, int(m.group(2))) if month else None
    if m := _MY_RE.match(text):
        month = _MONTH_NUMBER.get(m.group(1).casefold())
        return _time(int(m.group(2)), month, None) if month else None
    if m := _YEAR_RE.match(text):
        return _time(int(m.group(1)), None, None)
    return None


def _time(year: int, month: int | None, day: int | None) -> TimeValue | None:
    if year < 1:
        return None
    if month is not None and not 1 <= month <= 12:
        return None
    if day is not None:
        try:
            date(year, month, day)  # type: ignore[arg-type]
        except ValueError:
            return None
    return TimeValue(year, month, day)


def parse_time(value: str) -> date | int | None:
    """A date (day precision), an int year (year precision), or None (month precision included)."""
    parsed = parse_time_value(value)
    if parsed is None or parsed.precision == "month":
        return None
    if parsed.precision == "year":
        return parsed.year
    return date(parsed.year, parsed.month, parsed.day)  # type: ignore[arg-type]


def normalize_time(value: str) -> str | None:
    """Canonical label of a time value ('1879-03-14' -> '14 March 1879'); None when unparseable."""
    parsed = parse_time_value(value)
    return None if parsed is None else parsed.label


def parse_quantity(value_type: str, value: str) -> Quantity:
    """A quantity in the catalog unit of ``value_type``; raises ValueProblem naming the expected form."""
    m = _NUMBER_UNIT_RE.match(value.strip())
    unit = UNITS.get(value_type)
    if not m or not looks_like_quantity(value):
        raise ValueProblem(f"expects a number with an optional unit ({value_type})")
    number, word = m.group(1).replace(",", ""), m.group(2).strip()
    try:
        amount = Decimal(number)
    except InvalidOperation:
        raise ValueProblem(f"expects a number with an optional unit ({value_type})") from None
    if unit is None:  # a quantity type the catalog has no unit table for: keep its unit word as written
        return Quantity(amount, word)
    factor = unit.factors.get(word.casefold().rstrip("."))
    if factor is None:
        known = ", ".join(sorted({w for w in unit.factors if w})) or "no unit"
        raise ValueProblem(f"the unit is not understood for {value_type}: use {known}")
    converted = amount * factor
    if word.casefold().rstrip(".") in unit.inexact:
        converted = converted.quantize(Decimal(1).scaleb(-INEXACT_DECIMALS), rounding=ROUND_HALF_EVEN)
    if converted < unit.minimum:
        raise ValueProblem(f"expects a quantity of at least {unit.minimum} ({value_type})")
    if unit.integer and converted != converted.to_integral_value():
        raise ValueProblem(f"expects a whole number ({value_type})")
    return Quantity(converted.normalize() if converted else Decimal(0), unit.label)


def looks_like_time(value: str) -> bool:
    text = value.strip()
    if parse_time_value(text) is not None and not _YEAR_RE.match(text):
        return True
    try:
        datetime.fromisoformat(text)
        return True
    except ValueError:
        return False


def looks_like_quantity(value: str) -> bool:
    return bool(_QUANTITY_RE.match(value.strip())) and any(c.isdigit() for c in value)


def normalize_value(datatype: str, value_type: str, value: str) -> str:
    """The canonical label of ``value`` for a property of this datatype (whitespace collapsed; dates and
    quantities rewritten as the catalog writes them). Raises ValueProblem with a message for a 422."""
    text = " ".join(value.split())
    if not text:
        raise ValueProblem("value must not be empty")
    if len(text) > MAX_VALUE_LENGTH:
        raise ValueProblem(f"value is longer than {MAX_VALUE_LENGTH} characters")
    if "\n" in value.strip() or "\r" in value.strip():
        raise ValueProblem("value must be a single line")
    if datatype == "time":
        parsed = parse_time_value(text)
        if parsed is None:
            raise ValueProblem(
                "expects a date such as '14 March 1879', '1879-03-14', a month such as 'March 1879' "
                "or a year such as '1879'"
            )
        return parsed.label
    if datatype == "quantity":
        return parse_quantity(value_type, text).label
    if looks_like_time(text) or _YEAR_RE.match(text):
        raise ValueProblem(f"expects an item label (value type {value_type!r}), not a date or a year")
    if datatype == "wikibase-item" and looks_like_quantity(text):
        raise ValueProblem(f"expects an item label (value type {value_type!r}), not a number")
    return text


def validate_for_datatype(datatype: str, value_type: str, value: str) -> str | None:
    """None if ``value`` fits the datatype, else the 422 message (see :func:`normalize_value`)."""
    try:
        normalize_value(datatype, value_type, value)
    except ValueProblem as exc:
        return str(exc)
    return None


@lru_cache(maxsize=65536)
def value_key(datatype: str, value_type: str, value: str) -> tuple:
    """What a value means, for equality: a quantity's amount in the catalog unit ('196 cm' and
    '196 centimetres' are one value), a date with its precision, else the case-folded label. A value that does
    not parse (an imported pool's odd entry) falls back to its label. Cached: a null compares the same pool values
    a million times."""
    try:
        if datatype == "quantity":
            q = parse_quantity(value_type, value)
            return ("quantity", q.amount, q.unit)
        if datatype == "time":
            t = parse_time_value(value)
            if t is not None:
                return ("time", t.year, t.month, t.day)
    except ValueProblem:
        pass
    return ("label", " ".join(value.split()).casefold())


def precision_of(datatype: str, value_type: str, value: str) -> str | int | None:
    """A quantity's decimals or a date's precision ('day', 'month', 'year'); None for other values or
    values that do not parse."""
    try:
        if datatype == "quantity":
            return parse_quantity(value_type, value).decimals
        if datatype == "time":
            t = parse_time_value(value)
            return None if t is None else t.precision
    except ValueProblem:
        return None
    return None
