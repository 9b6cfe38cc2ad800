"""Deterministic counterfactual pools for dates, years and quantities (``pool_generator`` in a property file).

The same parameters always give the same pool, so stored audits can be reproduced from the catalog alone.
A pool can be drawn at another precision than its native one (``precision``): counterfactuals must look like the
truth, or a model could tell the truth by its format alone ('1879' among day dates, '72.5 kilograms' among whole
kilograms). Drawn at its native precision, a pool is exactly the catalog's.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from decimal import Decimal

from core.catalog.values import MONTHS, format_amount, format_date


def native_precision(params: dict) -> str | int:
    """The precision a generator draws at by default: 'day' or 'year' for times, decimals for quantities."""
    kind = params["kind"]
    if kind == "quantity":
        return int(params.get("decimals", 0))
    return "day" if kind == "date" else "year"


def on_native_grid(params: dict, amount: Decimal) -> bool:
    """Whether a quantity lies on the generator's grid start + i·step (its native precision)."""
    start, step = Decimal(str(params["start"])), Decimal(str(params["step"]))
    return ((amount - start) / step) == ((amount - start) / step).to_integral_value()


def generate_pool(params: dict, precision: str | int | None = None) -> list[str]:
    """The pool of a generator: native (``precision`` None), or redrawn at ``precision`` — a date precision
    'day', 'month', 'year' for time pools (the native one gives the native pool), a number of decimals for
    quantity pools (always a fresh grid of step 10^-decimals: the caller decides that a truth is off the native
    grid)."""
    kind = params["kind"]
    if precision is None or (kind != "quantity" and precision == native_precision(params)):
        if kind == "date":
            return _dates(params)
        if kind == "year":
            return _years(params)
        if kind == "quantity":
            return _quantities(params)
        raise ValueError(f"unknown pool generator kind {kind!r}")
    if kind == "quantity":
        return _quantities_at(params, int(precision))
    if kind in ("date", "year"):
        return _times_at(params, str(precision))
    raise ValueError(f"unknown pool generator kind {kind!r}")


def _dates(params: dict) -> list[str]:
    """``count`` distinct day-precision dates drawn uniformly between ``start_year`` and ``end_year``."""
    start = date(int(params["start_year"]), 1, 1)
    end = date(int(params["end_year"]), 12, 31)
    span = (end - start).days
    rng = random.Random(int(params.get("seed", 0)))
    offsets = rng.sample(range(span + 1), int(params["count"]))
    return [format_date(start + timedelta(days=o)) for o in sorted(offsets)]


def _years(params: dict) -> list[str]:
    """Every year in [start, end] (step ``step``), or ``count`` of them drawn with ``seed``."""
    years = list(range(int(params["start"]), int(params["end"]) + 1, int(params.get("step", 1))))
    if "count" in params and int(params["count"]) < len(years):
        years = sorted(random.Random(int(params.get("seed", 0))).sample(years, int(params["count"])))
    return [str(y) for y in years]


def _quantities(params: dict) -> list[str]:
    """An arithmetic grid start, start+step, ... <= end, formatted with ``decimals`` and a ``unit`` suffix."""
    start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
    decimals = int(params.get("decimals", 0))
    unit = params.get("unit", "")
    count = int(round((end - start) / step)) + 1
    values = [round(start + i * step, decimals) for i in range(count)]
    # "172.5 centimetres", "173 centimetres": trailing zeros carry no information and read unnaturally
    text = [f"{v:.{decimals}f}".rstrip("0").rstrip(".") if decimals else f"{v:.0f}" for v in values]
    return [f"{t} {unit}".strip() for t in text]


def _size(params: dict) -> int:
    """How many values a re-drawn pool holds: as many as the native one."""
    if params["kind"] == "quantity":
        return int(round((float(params["end"]) - float(params["start"])) / float(params["step"]))) + 1
    if params["kind"] == "date":
        return int(params["count"])
    return len(_years(params))


def _quantities_at(params: dict, decimals: int) -> list[str]:
    """Values on the grid of step 10^-decimals over [start, end], as many as the native pool, drawn with a seed
    of (seed, decimals) and formatted like the native pool (trailing zeros dropped, so about one in ten of a
    one-decimal pool reads as a whole number, just as one in ten one-decimal truths does)."""
    step = Decimal(1).scaleb(-decimals)
    start, end = Decimal(str(params["start"])), Decimal(str(params["end"]))
    slots = int((end - start) / step) + 1
    rng = random.Random(f"{params.get('seed', 0)}:quantity:{decimals}")
    picks = sorted(rng.sample(range(slots), min(_size(params), slots)))
    unit = params.get("unit", "")
    return [f"{format_amount(start + i * step)} {unit}".strip() for i in picks]


def _times_at(params: dict, precision: str) -> list[str]:
    """Days, months or years between the generator's first and last year, as many as the native pool."""
    first = int(params["start_year"] if params["kind"] == "date" else params["start"])
    last = int(params["end_year"] if params["kind"] == "date" else params["end"])
    rng = random.Random(f"{params.get('seed', 0)}:time:{precision}")
    size = _size(params)
    if precision == "year":
        years = list(range(first, last + 1))
        return [str(y) for y in sorted(rng.sample(years, min(size, len(years))))]
    if precision == "month":
        months = [(y, m) for y in range(first, last + 1) for m in range(1, 13)]
        return [f"{MONTHS[m - 1]} {y}" for y, m in sorted(rng.sample(months, min(size, len(months))))]
    if precision == "day":
        start = date(first, 1, 1)
        span = (date(last, 12, 31) - start).days
        offsets = sorted(rng.sample(range(span + 1), min(size, span + 1)))
        return [format_date(start + timedelta(days=o)) for o in offsets]
    raise ValueError(f"unknown date precision {precision!r}")
