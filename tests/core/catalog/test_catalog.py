"""The property catalog: every file loads, every template is a well-formed canary, pools are type-consistent."""

from __future__ import annotations

import json
import re

import pytest

from core.catalog import (
    DATA_DIR,
    CatalogError,
    UnknownProperty,
    counterfactuals,
    load_catalog,
    property_from_dict,
    split_template,
)
from core.catalog.values import parse_time

STARTER = ("P106", "P27", "P19", "P21", "P1412")
# Properties with few distinct values: their pools list every value there is (sex or gender, blood type...).
FEW_VALUED = {"P21", "P91", "P412", "P552", "P1196", "P1340", "P1853", "P1884", "P1971"}
SUBJECTS = ("Ada Lovelace", "Jean-Luc O'Brien", "Zhang Wei", "This person", "Name {value} With Braces")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_catalog_holds_the_starter_properties(catalog):
    missing = [pid for pid in STARTER if pid not in catalog]
    assert not missing, f"starter properties missing from the catalog: {missing}"


def test_catalog_has_at_least_60_properties_with_unique_pids(catalog):
    files = sorted(p.stem for p in DATA_DIR.glob("P*.json"))
    assert len(files) == len(set(files)) == len(catalog), "one file per property, unique pids"
    assert len(catalog) >= 60, f"the issue asks for >= 60 properties, catalog has {len(catalog)}"


def test_every_property_has_a_baseline_and_ten_paraphrases(catalog):
    # exactly 11: strict, lenient and share mean the same across properties only with equal denominators
    # (P106 had 12, so its lenient rate at chance was 1 − (100/101)^12 = 0.113 against 0.104 elsewhere)
    odd = {p.pid: len(p.templates) for p in catalog if len(p.templates) != 11}
    assert not odd, f"properties without exactly 1 + 10 templates: {odd}"
    dupes = {p.pid for p in catalog if len(set(p.templates)) != len(p.templates)}
    assert not dupes, f"repeated templates in {dupes}"


def test_every_template_has_exactly_one_subject_and_one_value_slot(catalog):
    for prop in catalog:
        for template in prop.templates:
            assert template.count("{subject}") == 1, f"{prop.pid}: {template!r}"
            assert template.count("{value}") == 1, f"{prop.pid}: {template!r}"
            assert not re.search(r"\{(?!subject\}|value\})", template), f"{prop.pid}: stray brace in {template!r}"


def test_pools_are_large_enough_and_free_of_repeats(catalog):
    for prop in catalog:
        if prop.pid in FEW_VALUED:
            assert len(prop.pool) >= 2, f"{prop.pid} pool has {len(prop.pool)} values"
        else:
            assert len(prop.pool) >= 100, f"{prop.pid} pool has only {len(prop.pool)} values (need >= 100)"
        folded = [v.casefold() for v in prop.pool]
        assert len(folded) == len(set(folded)), f"{prop.pid} pool repeats a value (case-insensitively)"


def test_pool_values_pass_their_own_property_validation(catalog):
    for prop in catalog:
        bad = [v for v in prop.pool if prop.validate_value(v) is not None]
        assert not bad, f"{prop.pid}: pool values rejected by validate_value: {bad[:5]}"


def test_rendered_sentences_are_well_formed_for_sample_values(catalog):
    for prop in catalog:
        samples = (prop.pool[0], prop.pool[len(prop.pool) // 2], prop.pool[-1])
        for i in range(len(prop.templates)):
            for subject in SUBJECTS:
                for value in samples:
                    sentence = prop.render(i, subject, value)
                    assert subject in sentence and value.casefold() in sentence.casefold(), sentence
                    assert "{" not in sentence.replace(subject, ""), f"unfilled slot: {sentence!r}"
                    assert not sentence[0].islower(), f"{prop.pid}: sentence must start with a capital: {sentence!r}"
                    assert sentence.endswith("."), f"{prop.pid}: sentence must end with a full stop: {sentence!r}"
                    assert "  " not in sentence and " ." not in sentence, f"{prop.pid}: spacing in {sentence!r}"


def test_split_round_trips_and_the_continuation_starts_with_the_value(catalog):
    for prop in catalog:
        value = prop.pool[1]
        for i in range(len(prop.templates)):
            prefix, continuation = prop.split(i, "Grace Hopper", value)
            assert prefix + continuation == prop.render(i, "Grace Hopper", value)
            assert continuation.casefold().startswith(value.casefold()), f"{prop.pid}[{i}]: {continuation!r}"
            assert not prefix or prefix.endswith((" ", "(")), f"{prop.pid}[{i}]: prefix {prefix!r} glues the value"


def test_value_first_template_is_sentence_cased():
    prop = property_from_dict(
        {
            "pid": "P9999999",
            "label": "x",
            "datatype": "wikibase-item",
            "value_type": "occupation",
            "relation": "copular",
            "question": "q {subject}",
            "templates": ["{value} is what {subject} does."],
            "pool": ["physicist"],
        }
    )
    assert prop.split(0, "Ada", "physicist") == ("", "Physicist is what Ada does.")


def test_unknown_property_raises_with_its_pid(catalog):
    with pytest.raises(UnknownProperty) as info:
        catalog.get("P999999999")
    assert info.value.pid == "P999999999"
    assert "P999999999" not in catalog


def test_template_with_two_value_slots_is_rejected():
    raw = json.loads((DATA_DIR / "P106.json").read_text())
    raw["templates"] = ["{subject} is {value} and {value}."]
    with pytest.raises(CatalogError, match="exactly one"):
        property_from_dict(raw)


def test_counterfactuals_exclude_ground_truths_case_insensitively_and_are_deterministic(catalog):
    prop = catalog.get("P106")
    truths = [prop.pool[0].upper(), prop.pool[5]]
    first = counterfactuals(prop, truths, 100, seed=7)
    assert len(first) == 100 and len(set(first)) == 100
    assert not {v.casefold() for v in first} & {t.casefold() for t in truths}
    assert first == counterfactuals(prop, truths, 100, seed=7), "same seed must give the same values"
    assert first != counterfactuals(prop, truths, 100, seed=8), "another seed should draw another set"


def test_counterfactuals_return_all_there_are_for_small_pools(catalog):
    prop = catalog.get("P21")
    got = counterfactuals(prop, ["Male"], 100, seed=1)
    assert "male" not in got and len(got) == len(prop.pool) - 1


@pytest.mark.parametrize(
    ("pid", "value", "ok"),
    [
        ("P106", "physicist", True),
        ("P106", "1879-03-14", False),
        ("P106", "14 March 1879", False),
        ("P106", "42", False),
        ("P106", "", False),
        ("P106", "x" * 400, False),
        ("P27", "United States", True),
    ],
)
def test_validate_value_by_datatype(catalog, pid, value, ok):
    message = catalog.get(pid).validate_value(value)
    assert (message is None) == ok, f"{pid} {value[:20]!r}: {message}"
    if message is not None and value:
        assert value not in message, "a validation message must never echo the value (personal data)"


def test_time_values_accept_common_formats():
    assert str(parse_time("1879-03-14")) == "1879-03-14"
    assert str(parse_time("+1879-03-14T00:00:00Z")) == "1879-03-14"
    assert str(parse_time("14 March 1879")) == "1879-03-14"
    assert str(parse_time("March 14, 1879")) == "1879-03-14"
    assert parse_time("1879") == 1879
    assert parse_time("31 February 1879") is None
    assert parse_time("physicist") is None


def test_split_template_fills_a_free_template_like_a_catalog_one(catalog):
    prop = catalog.get("P106")
    for i, template in enumerate(prop.templates):
        assert split_template(template, "Ada", "physicist") == prop.split(i, "Ada", "physicist")
    assert split_template("{subject} said {value}.", "A {value} B", "x") == ("A {value} B said ", "x.")
