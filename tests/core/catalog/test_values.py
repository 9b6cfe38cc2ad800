"""Dates and quantities by datatype: one normaliser for every way a value comes in, equality by meaning, and
counterfactual pools drawn in the truth's own format and precision."""

from __future__ import annotations

import pytest

from core.catalog import ValueProblem, counterfactuals, load_catalog
from core.catalog.values import normalize_value, precision_of, value_key


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.mark.parametrize(
    ("pid", "raw", "canonical"),
    [
        ("P2048", "196 cm", "196 centimetres"),
        ("P2048", "196 centimeters", "196 centimetres"),
        ("P2048", "196", "196 centimetres"),
        ("P2048", "1.962 m", "196.2 centimetres"),
        ("P2048", "1.96 metres", "196 centimetres"),
        ("P2048", "196.50 cm", "196.5 centimetres"),
        ("P2048", "6 ft", "182.9 centimetres"),
        ("P2067", "72.5 kg", "72.5 kilograms"),
        ("P2067", "72500 g", "72.5 kilograms"),
        ("P2067", "160 lb", "72.6 kilograms"),
        ("P1971", "3", "3"),
        ("P1971", "1,000", "1000"),
        ("P569", "1879-03-14", "14 March 1879"),
        ("P569", "+1879-03-14T00:00:00Z", "14 March 1879"),
        ("P569", "March 14, 1879", "14 March 1879"),
        ("P569", "14 Mar 1879", "14 March 1879"),
        ("P569", "March 1879", "March 1879"),
        ("P569", "1879-03", "March 1879"),
        ("P569", "1879", "1879"),
        ("P106", "  theoretical   physicist ", "theoretical physicist"),
    ],
)
def test_values_are_normalised_to_the_catalogs_spelling(catalog, pid, raw, canonical):
    assert catalog.get(pid).normalize(raw) == canonical
    assert catalog.get(pid).normalize(canonical) == canonical, "idempotent"


@pytest.mark.parametrize(
    ("pid", "raw", "words"),
    [
        ("P2048", "196 stone", "unit is not understood"),
        ("P2048", "72 kg", "unit is not understood"),
        ("P2048", "-196 cm", "at least 0"),
        ("P1971", "2.5", "whole number"),
        ("P1971", "3 children", "unit is not understood"),
        ("P569", "31 February 1879", "expects a date"),
        ("P569", "Democrats 66", "expects a date"),
        ("P106", "1879", "not a date or a year"),
    ],
)
def test_bad_values_name_the_fix_and_never_echo_the_value(catalog, pid, raw, words):
    with pytest.raises(ValueProblem, match=words) as err:
        catalog.get(pid).normalize(raw)
    assert raw not in str(err.value)


def test_values_are_equal_by_meaning():
    height = ("quantity", "quantity:height_cm")
    assert value_key(*height, "196 cm") == value_key(*height, "196 centimetres") == value_key(*height, "1.96 m")
    assert value_key(*height, "196.2 centimetres") != value_key(*height, "196 centimetres")
    assert value_key("time", "date", "1879-03-14") == value_key("time", "date", "14 March 1879")
    assert value_key("time", "date", "1879") != value_key("time", "date", "1 January 1879"), "precision counts"
    item = ("wikibase-item", "occupation")
    assert value_key(*item, "Physicist") == value_key(*item, "physicist")
    assert precision_of(*height, "196.25 cm") == 2 and precision_of("time", "date", "March 1879") == "month"
    assert normalize_value("quantity", "quantity:height_cm", "0.0 m") == "0 centimetres"


@pytest.mark.parametrize(
    ("pid", "truth", "duplicate"),
    [
        ("P2048", "196 cm", "196 centimetres"),
        ("P2048", "1.965 m", "196.5 centimetres"),
        ("P569", "1903-08-28", "28 August 1903"),
        ("P2031", "1900", "1900"),
    ],
)
def test_counterfactuals_exclude_the_truth_by_normalised_value(catalog, pid, truth, duplicate):
    prop = catalog.get(pid)
    assert duplicate in prop.pool_for([prop.normalize(truth)]), "the pool holds the truth's value"
    drawn = counterfactuals(prop, [truth], 500, seed=0)
    assert duplicate not in drawn, f"{duplicate!r} left among the counterfactuals of {truth!r}"
    keys = {prop.value_key(v) for v in drawn}
    assert prop.value_key(truth) not in keys and len(keys) == len(drawn)


@pytest.mark.parametrize(
    ("pid", "truth", "precision"),
    [
        ("P2048", "196.2 centimetres", 1),  # off the 0.5 cm grid
        ("P2048", "196.25 centimetres", 2),
        ("P2067", "72.5 kilograms", 1),  # the pool holds whole kilograms
        ("P569", "14 March 1879", "day"),
        ("P569", "March 1879", "month"),
        ("P569", "1879", "year"),  # the pool holds day dates
        ("P2031", "14 March 1990", "day"),  # the pool holds years
        ("P2031", "1990", "year"),
    ],
)
def test_pools_are_drawn_in_the_truths_format_and_precision(catalog, pid, truth, precision):
    prop = catalog.get(pid)
    drawn = counterfactuals(prop, [truth], 100, seed=0)
    assert len(drawn) == 100
    got = [precision_of(prop.datatype, prop.value_type, v) for v in drawn]
    if isinstance(precision, str):
        assert set(got) == {precision}, f"{truth!r}: counterfactual precisions {sorted(set(map(str, got)))}"
    else:
        # trailing zeros are dropped ("180.0" reads "180"), so some values show fewer decimals, as truths do
        same = sum(p == precision for p in got)
        assert same >= 70 and max(got) == precision, f"{truth!r}: {same} of 100 with {precision} decimals"
        units = {v.split(" ", 1)[1] for v in drawn}
        assert units == {prop.normalize(truth).split(" ", 1)[1]}


def test_a_truth_on_the_native_grid_keeps_the_catalogs_pool(catalog):
    height = catalog.get("P2048")
    assert height.pool_for(["196 centimetres"]) == height.pool == height.pool_for(["196.5 centimetres"])
    assert catalog.get("P569").pool_for(["14 March 1879"]) == catalog.get("P569").pool
    assert counterfactuals(height, ["196 centimetres"], 100, 3) == counterfactuals(height, ["196 centimetres"], 100, 3)
    assert {precision_of("quantity", "quantity:height_cm", v) for v in height.pool} == {0, 1}, "0.5 cm grid"
