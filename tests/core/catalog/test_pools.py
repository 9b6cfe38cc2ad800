"""Generated pools (dates, years, quantities) are deterministic and stay in their declared ranges."""

from __future__ import annotations

from core.catalog.pools import generate_pool
from core.catalog.values import parse_time


def test_date_pool_is_deterministic_distinct_and_in_range():
    params = {"kind": "date", "start_year": 1900, "end_year": 2005, "count": 150, "seed": 569}
    first = generate_pool(params)
    assert first == generate_pool(dict(params)), "the same parameters must give the same pool"
    assert len(set(first)) == 150
    years = [parse_time(v).year for v in first]
    assert min(years) >= 1900 and max(years) <= 2005, (min(years), max(years))
    assert first != generate_pool({**params, "seed": 570}), "another seed should give another pool"


def test_year_pool_covers_the_range():
    pool = generate_pool({"kind": "year", "start": 1850, "end": 2020})
    assert pool[0] == "1850" and pool[-1] == "2020" and len(pool) == 171


def test_quantity_pool_formats_without_trailing_zeros():
    pool = generate_pool({"kind": "quantity", "start": 99.5, "end": 101, "step": 0.5, "decimals": 1, "unit": "cm"})
    assert pool == ["99.5 cm", "100 cm", "100.5 cm", "101 cm"], pool
    counts = generate_pool({"kind": "quantity", "start": 0, "end": 3, "step": 1, "decimals": 0, "unit": ""})
    assert counts == ["0", "1", "2", "3"], counts
