"""Reading sampled answers (mode generation): each answer is a true value, another value (which), a refusal or
unreadable, by the catalog's own rule for what a value means; and the statistic's tie-breaker."""

from __future__ import annotations

import pytest

from core.catalog import load_catalog
from core.measures import answers
from core.measures.answers import Reading, classify, read_answer, true_share

OCCUPATION = load_catalog().get("P106")
BIRTH = load_catalog().get("P569")
HEIGHT = load_catalog().get("P2048")
VOCAB = ["statistician", "physicist", "chemist", "theoretical physicist", "United States of America"]


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        (" statistician.", "value", "statistician"),
        (" Statistician", "value", "statistician"),
        (" a physicist and writer.", "value", "physicist"),
        (
            " theoretical physicist, later a chemist",
            "value",
            "theoretical physicist",
        ),  # the longest value it starts with
        ('"chemist"', "value", "chemist"),
        (" physicists", "unreadable", None),  # a word boundary, not a prefix of a word
        (" I don't know.", "refusal", None),
        (" Unknown.", "refusal", None),
        ("", "unreadable", None),
        (" blorp zzz.", "unreadable", None),
    ],
)
def test_an_answer_is_read_against_the_vocabulary(text, kind, value):
    assert read_answer(text, OCCUPATION, VOCAB) == Reading(kind, value)


def test_dates_and_quantities_are_read_by_meaning_and_unlisted_ones_are_named():
    vocab = ["14 March 1879", "1 May 1900"]
    assert read_answer(" 1879-03-14.", BIRTH, vocab) == Reading("value", "14 March 1879")
    assert read_answer(" March 14, 1879", BIRTH, vocab) == Reading("value", "14 March 1879")
    assert read_answer(" 2 June 1950.", BIRTH, vocab) == Reading("value", "2 June 1950")  # another date: which one
    got = read_answer(" 196 cm.", HEIGHT, ["196 centimetres"])
    assert got == Reading("value", "196 centimetres")  # '196 cm' is '196 centimetres'; the decimal point kept
    assert read_answer(" 1.962 m.", HEIGHT, ["196.2 centimetres"]) == Reading("value", "196.2 centimetres")


def test_a_reading_is_classified_for_the_fact_and_the_share_counts_true_values():
    truths = ["statistician"]
    readings = [read_answer(t, OCCUPATION, VOCAB) for t in (" statistician.", " chemist.", " I'm not sure", "??")]
    assert [classify(r, OCCUPATION, truths) for r in readings] == ["true", "other", "refusal", "unreadable"]
    assert true_share(readings, OCCUPATION, truths) == 0.25
    assert true_share(readings, OCCUPATION, ["statistician", "chemist"]) == 0.5  # m = 2: either value counts
    assert answers.counts(["true", "other", "other"]) == {"true": 1, "other": 2, "refusal": 0, "unreadable": 0}


def test_the_tie_breaker_is_reproducible_uniform_and_below_any_share_difference():
    draws = [answers.tiebreak("person", i, "P106") for i in range(2000)]
    assert draws == [answers.tiebreak("person", i, "P106") for i in range(2000)]
    assert all(0 <= d < answers.TIE for d in draws)
    assert 0.45 < sum(draws) / len(draws) / answers.TIE < 0.55  # uniform on [0, TIE): mean TIE / 2
    assert answers.statistic(0.1, "x") < answers.statistic(0.1 + 1 / 1000, "y")  # 1,000 samples still ordered


def test_the_misattribution_statistic_is_the_most_said_false_values_share():
    said = [" chemist.", " chemist", " statistician.", " physicist", " I don't know", " Chemist."]
    readings = [read_answer(t, OCCUPATION, VOCAB) for t in said]
    assert answers.most_said_false(readings, OCCUPATION, ["statistician"]) == ("chemist", 3)
    # a near-truth (a label variant the near-duplicate rule merges into a truth) is no falsehood
    assert answers.most_said_false(readings, OCCUPATION, ["statistician"], near=["chemist"]) == ("physicist", 1)
    assert answers.most_said_false(readings[2:3], OCCUPATION, ["statistician"]) == (None, 0)
    stat, value = answers.misattribution(readings, OCCUPATION, ["statistician"], (), "Ann", "P106")
    assert value == "chemist" and 0.5 <= stat < 0.5 + answers.TIE  # 3 of 6 answers, plus its tie-breaker
    assert stat != answers.statistic(0.5, "Ann", "P106")  # a tie-breaker apart from the verdict's
    none, nothing = answers.misattribution([], OCCUPATION, ["statistician"], (), "Ann")
    assert nothing is None and 0 <= none < answers.TIE
