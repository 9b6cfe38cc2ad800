"""Coverage measures (Di Palma et al. 2025): prompts, normalisation, exact and fuzzy match, buckets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.measures.coverage import (
    DEFAULT_K,
    ProbeRecord,
    bucket_of,
    char_ratio,
    coverage,
    coverage_by_bucket,
    exact_match,
    expected_continuation,
    first_line,
    interaction_prompts,
    judge,
    normalise_line,
    quantile_edges,
    record_prompts,
    summarise,
)


def create_items(n: int) -> list[ProbeRecord]:
    return [ProbeRecord(str(i), f"{i}::Title {i} (1990)::Drama", popularity=i) for i in range(1, n + 1)]


def test_default_k_is_the_papers_three_examples() -> None:
    assert DEFAULT_K == 3


def test_prompt_is_k_example_lines_then_the_id_and_delimiter() -> None:
    prompts = record_prompts(create_items(6), "::", k=3)
    assert [p.record.key for p in prompts] == ["4", "5", "6"], "the k example records must not be probed"
    first = prompts[0]
    assert first.prompt == "1::Title 1 (1990)::Drama\n2::Title 2 (1990)::Drama\n3::Title 3 (1990)::Drama\n4::"
    assert first.expected == "Title 4 (1990)::Drama"
    assert len({p.prefix for p in prompts}) == 1, "every prompt of an items probe shares the few-shot prefix"


def test_sample_is_seeded_and_in_file_order() -> None:
    records = create_items(50)
    a = [p.record.key for p in record_prompts(records, "::", k=3, sample=10, seed=7)]
    b = [p.record.key for p in record_prompts(records, "::", k=3, sample=10, seed=7)]
    c = [p.record.key for p in record_prompts(records, "::", k=3, sample=10, seed=8)]
    assert a == b and len(a) == 10 and a != c
    assert a == sorted(a, key=int)


def test_interaction_prompt_gives_the_users_first_k_lines_and_asks_for_the_next() -> None:
    history = [ProbeRecord("7", f"7::{item}::4::{100 + t}", popularity=t) for t, item in enumerate((11, 12, 13, 14))]
    short = [ProbeRecord("8", "8::11::3::5")]
    prompts = interaction_prompts([history, short], "::", k=2)
    assert len(prompts) == 1, "a user with k or fewer interactions has nothing to predict"
    assert prompts[0].prompt == "7::11::4::100\n7::12::4::101\n7::"
    assert prompts[0].expected == "13::4::102"
    assert prompts[0].record.popularity == 2


def test_normalisation_ignores_spacing_and_unicode_form_but_not_case() -> None:
    assert normalise_line("  Toy  Story (1995) :: Comedy \r\nnext line", "::") == "Toy Story (1995)::Comedy"
    assert normalise_line("Ｔｏｙ", "::") == "Toy", "NFKC folds full-width letters"
    assert exact_match("Toy Story (1995)::Comedy\n2::", " Toy Story (1995)::Comedy", "::")
    assert not exact_match("toy story (1995)::Comedy", "Toy Story (1995)::Comedy", "::")


def test_exact_match_on_selected_columns() -> None:
    # the paper's interaction memorization compares (item, rating), not the timestamp
    assert exact_match("13::4::999", "13::4::102", "::", columns=(0, 1))
    assert not exact_match("13::5::102", "13::4::102", "::", columns=(0, 1))
    assert not exact_match("13", "13::4::102", "::", columns=(0, 1)), "a missing field never matches"


def test_expected_continuation_requires_the_key_first() -> None:
    assert expected_continuation('1,"Heat, The",Drama', "1", ",") == '"Heat, The",Drama'
    with pytest.raises(ValueError):
        expected_continuation("Drama::1", "1", "::")


def test_first_line_stops_at_the_end_of_line() -> None:
    assert first_line("Heat (1995)::Action\n6::Sabrina") == "Heat (1995)::Action"


def test_char_ratio_by_hand() -> None:
    assert char_ratio("abc", "abc") == 1.0
    assert char_ratio("abc", "abd") == pytest.approx(4 / 6)  # LCS "ab"
    assert char_ratio("abcd", "") == 0.0
    assert char_ratio("kitten", "sitting") == pytest.approx(2 * 4 / 13)  # LCS "ittn"
    assert char_ratio("", "") == 1.0


@given(st.text(max_size=30), st.text(max_size=30))
def test_char_ratio_is_symmetric_and_bounded(a: str, b: str) -> None:
    r = char_ratio(a, b)
    assert 0.0 <= r <= 1.0
    assert r == pytest.approx(char_ratio(b, a))
    assert (r == 1.0) == (a == b)


def test_quantile_edges_collapse_ties() -> None:
    assert quantile_edges([1, 2, 3, 4, 5, 6, 7, 8], 4) == [1.0, 2.75, 4.5, 6.25, 8.0]
    assert quantile_edges([1, 1, 1, 1, 1, 1, 2, 9], 4) == [1.0, 1.25, 9.0]
    assert quantile_edges([3, 3], 4) == [3.0, 3.0]
    # raw quantile edges [0, 2.5, 3, 3.5, 8]: no count falls in (3, 3.5], so that edge goes
    assert quantile_edges([0, 1, 3, 3, 3, 3, 5, 8], 4) == [0.0, 2.5, 3.0, 8.0]


def test_bucket_boundaries_are_upper_inclusive() -> None:
    edges = [1.0, 2.0, 5.0, 9.0]
    assert [bucket_of(v, edges) for v in (1, 2, 2.5, 5, 6, 9)] == [0, 0, 1, 1, 2, 2]


def test_coverage_by_bucket_counts_by_hand() -> None:
    matched = [True, False, True, True, False, True]
    popularity = [1, 1, 2, 5, 8, 9]
    edges = [1.0, 2.0, 9.0]
    buckets = coverage_by_bucket(matched, popularity, edges)
    assert [(b.probed, b.matched) for b in buckets] == [(3, 2), (3, 2)]
    assert buckets[0].coverage == pytest.approx(2 / 3)
    assert coverage(matched) == pytest.approx(4 / 6)
    assert coverage([]) == 0.0


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 50)), min_size=1, max_size=60), st.integers(1, 6))
def test_buckets_partition_the_probed_records(rows: list[tuple[bool, int]], n_buckets: int) -> None:
    matched = [m for m, _ in rows]
    popularity = [p for _, p in rows]
    edges = quantile_edges(popularity, n_buckets)
    buckets = coverage_by_bucket(matched, popularity, edges)
    assert sum(b.probed for b in buckets) == len(rows)
    assert sum(b.matched for b in buckets) == sum(matched)
    assert len(buckets) <= n_buckets
    assert all(b.probed > 0 for b in buckets), f"empty bucket with edges {edges}"


def test_judge_and_summary() -> None:
    prompts = record_prompts(create_items(8), "::", k=2)
    generated = [p.expected if int(p.record.key) % 2 == 0 else "Nope (1990)::Drama" for p in prompts]
    outcomes = [judge(p, g + "\n99::junk", "::") for p, g in zip(prompts, generated, strict=True)]
    assert [o.matched for o in outcomes] == [False, True, False, True, False, True]
    assert all(o.char_ratio == 1.0 for o in outcomes if o.matched)
    assert all(0 < o.char_ratio < 1 for o in outcomes if not o.matched), "fuzzy is stored, never a match"
    summary = summarise(outcomes, n_buckets=2)
    assert summary["coverage"] == pytest.approx(0.5)
    assert summary["bucket_edges"] == [3.0, 5.5, 8.0]
    assert [b["probed"] for b in summary["buckets"]] == [3, 3]
