"""Deterministic counterfactual pools for dates, years and quantities (``pool_generator`` in a property file).

The same parameters always give the same pool, so stored audits can be reproduced from the catalog alone.
"""

from __future__ import annotations

import random
from datetime import date, timedelta

from core.catalog.values import format_date


def generate_pool(params: dict) -> list[str]:
    kind = params["kind"]
    if kind == "date":
        return _dates(params)
    if kind == "year":
        return _years(params)
    if kind == "quantity":
        return _quantities(params)
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
