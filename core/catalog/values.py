"""Value formats per Wikidata datatype: parsing dates and quantities, and validating user-supplied values.

Messages never echo the value: a value may be personal data and messages end up in 422 bodies and logs.
"""

from __future__ import annotations

import re
from datetime import date, datetime

MAX_VALUE_LENGTH = 300
# Spelled out rather than calendar.month_name, which follows the process locale.
MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_MONTH_NUMBER = {m.casefold(): i + 1 for i, m in enumerate(MONTHS)}
_ISO_RE = re.compile(r"^[+]?(\d{1,4})-(\d{2})-(\d{2})(T00:00:00Z)?$")
_DMY_RE = re.compile(r"^(\d{1,2}) ([A-Za-z]+),? (\d{1,4})$")
_MDY_RE = re.compile(r"^([A-Za-z]+) (\d{1,2}), (\d{1,4})$")
_YEAR_RE = re.compile(r"^[+]?(\d{1,4})$")
# A number with at most one unit word ("178 centimetres", "72 kg"); "1984 Summer Olympics" is an item label.
_QUANTITY_RE = re.compile(r"^[+-]?\d[\d,]*(?:\.\d+)?(?:\s*[A-Za-z%°][A-Za-z%°./]*)?$")


def format_date(d: date) -> str:
    """The catalog's date label, e.g. '14 March 1879' (Wikidata's English rendering of a day date)."""
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def parse_time(value: str) -> date | int | None:
    """A date (day precision), an int year (year precision), or None when the text is not a time value."""
    text = value.strip()
    if m := _ISO_RE.match(text):
        return _safe_date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if m := _DMY_RE.match(text):
        month = _MONTH_NUMBER.get(m.group(2).casefold())
        return _safe_date(int(m.group(3)), month, int(m.group(1))) if month else None
    if m := _MDY_RE.match(text):
        month = _MONTH_NUMBER.get(m.group(1).casefold())
        return _safe_date(int(m.group(3)), month, int(m.group(2))) if month else None
    if m := _YEAR_RE.match(text):
        return int(m.group(1))
    return None


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day) if year >= 1 else None
    except ValueError:
        return None


def normalize_time(value: str) -> str | None:
    """Canonical label of a time value ('1879-03-14' -> '14 March 1879'); None when unparseable."""
    parsed = parse_time(value)
    if parsed is None:
        return None
    return str(parsed) if isinstance(parsed, int) else format_date(parsed)


def looks_like_time(value: str) -> bool:
    text = value.strip()
    if parse_time(text) is not None and not _YEAR_RE.match(text):
        return True
    try:
        datetime.fromisoformat(text)
        return True
    except ValueError:
        return False


def looks_like_quantity(value: str) -> bool:
    return bool(_QUANTITY_RE.match(value.strip())) and any(c.isdigit() for c in value)


def validate_for_datatype(datatype: str, value_type: str, value: str) -> str | None:
    text = value.strip()
    if not text:
        return "value must not be empty"
    if len(text) > MAX_VALUE_LENGTH:
        return f"value is longer than {MAX_VALUE_LENGTH} characters"
    if "\n" in text or "\r" in text:
        return "value must be a single line"
    if datatype == "time":
        if parse_time(text) is None:
            return "expects a date such as '14 March 1879', '1879-03-14' or a year such as '1879'"
        return None
    if datatype == "quantity":
        if not looks_like_quantity(text):
            return f"expects a number with an optional unit ({value_type})"
        return None
    if looks_like_time(text) or _YEAR_RE.match(text):
        return f"expects an item label (value type {value_type!r}), not a date or a year"
    if datatype == "wikibase-item" and looks_like_quantity(text):
        return f"expects an item label (value type {value_type!r}), not a number"
    return None
