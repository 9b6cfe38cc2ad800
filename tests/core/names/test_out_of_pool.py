"""The out-of-pool reservoirs (core.names.out_of_pool): never a pool value, places fitting the name's origin,
deterministic draws, and no reservoir where a kind has none."""

from __future__ import annotations

from dataclasses import replace

from faker.providers.geo import Provider as Geo

from core.catalog import load_catalog
from core.names.origins import ORIGINS
from core.names.out_of_pool import COUNTRY_CODES, has_reservoir, out_of_pool_values, reservoir


def test_reservoirs_hold_no_pool_value_by_meaning_and_no_written_qualifier() -> None:
    catalog = load_catalog()
    for pid in ("P19", "P20", "P27", "P1412", "P106"):
        prop = catalog.get(pid)
        values = reservoir(prop)
        assert len(values) >= 70, pid
        assert not any(prop.holds([v]) for v in values), pid
        assert len({prop.value_key(v) for v in values}) == len(values), pid
        assert not any("," in v or "(" in v for v in values), pid
    assert "Soviet Union" in reservoir(catalog.get("P27")) and "actuary" in reservoir(catalog.get("P106"))


def test_an_imported_pool_is_left_out_too() -> None:
    prop = load_catalog().get("P19")
    town = reservoir(prop)[0]
    assert town not in reservoir(replace(prop, pool=(*prop.pool, town)))


def test_places_fit_the_name_origin_and_draws_are_deterministic() -> None:
    prop = load_catalog().get("P19")
    towns = {p[2]: p[3] for p in Geo.land_coords}
    for origin in ORIGINS:
        code = COUNTRY_CODES[origin.country]
        drawn = out_of_pool_values(prop, origin.locale, f"0:1:{origin.locale}", 3)
        assert drawn == out_of_pool_values(prop, origin.locale, f"0:1:{origin.locale}", 3)
        assert len(set(drawn)) == len(drawn) >= 1 and not prop.holds(drawn[:1])
        if code in towns.values():  # a town of the origin's own country wherever Faker lists one
            assert all(towns[t] == code for t in drawn), (origin.locale, drawn)
    keys = {tuple(out_of_pool_values(prop, "de_DE", f"0:{i}:P19", 1)) for i in range(20)}
    assert len(keys) > 10  # each person draws their own


def test_kinds_without_a_reservoir() -> None:
    catalog = load_catalog()
    for pid in ("P21", "P569", "P2048", "P742"):  # closed list, generated dates and quantities, names
        assert not has_reservoir(catalog.get(pid)) and out_of_pool_values(catalog.get(pid), "de_DE", "k", 3) == []
