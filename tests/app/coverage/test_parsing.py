"""Streaming parsing of MovieLens .dat and CSV/TSV dataset files, with validation by line number."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from app.coverage.formats import MOVIELENS_MAPPINGS, DatasetError, mapping_from_dict
from app.coverage.parsing import ParseReport, Popularity, format_line, parse_file


def create_lines(*lines: str, encoding: str = "utf-8") -> list[bytes]:
    return [f"{line}\n".encode(encoding) for line in lines]


def parse(lines, target, fmt="movielens", mapping=None, **known):
    report = ParseReport()
    mapping = mapping if mapping is not None else mapping_from_dict(target, None, fmt)
    return list(parse_file(lines, target, fmt, mapping, report, **known)), report


def test_movielens_items_parse_with_fields_and_keys() -> None:
    records, report = parse(
        create_lines("1::Toy Story (1995)::Animation|Children's|Comedy", "2::Jumanji (1995)::Adventure"), "items"
    )
    assert [r.key for r in records] == ["1", "2"]
    assert records[0].fields == ("1", "Toy Story (1995)", "Animation|Children's|Comedy")
    assert format_line(records[0].fields, "movielens") == "1::Toy Story (1995)::Animation|Children's|Comedy"
    assert (report.rows, report.malformed) == (2, 0)


def test_malformed_lines_are_counted_with_line_numbers_and_skipped() -> None:
    lines = create_lines(
        "1::Toy Story (1995)::Comedy",
        "2::Jumanji (1995)",  # missing a field
        "",  # blank: not a record, not an error
        "::Heat (1995)::Action",  # empty id
        "5::Father of the Bride Part II (1995)::Comedy",
    )
    records, report = parse(lines, "items")
    assert [r.key for r in records] == ["1", "5"]
    assert report.malformed == 2
    assert report.problems == [(2, "expected 3 '::'-separated fields, found 2"), (4, "item_id is empty")]


def test_problem_reasons_never_echo_the_line() -> None:
    _, report = parse(create_lines("1::F::25::10::48067", "2::M::56::16::70072::extra"), "users")
    assert report.problems and all("70072" not in reason for _, reason in report.problems)


def test_latin1_lines_are_decoded() -> None:
    records, _ = parse(create_lines("73::Misérables, Les (1995)::Drama", encoding="latin-1"), "items")
    assert records[0].fields[1] == "Misérables, Les (1995)"


def test_interactions_carry_user_item_and_timestamp_and_feed_popularity() -> None:
    records, _ = parse(
        create_lines("1::1193::5::978300760", "1::661::3::978302109", "2::1193::4::978298413"), "interactions"
    )
    assert (records[0].user_id, records[0].item_id, records[0].timestamp) == ("1", "1193", 978300760)
    popularity = Popularity()
    for record in records:
        popularity.add(record)
    assert popularity.items == {"1193": 2, "661": 1}
    assert popularity.users == {"1": 2, "2": 1}


def test_bad_timestamp_is_a_malformed_line() -> None:
    _, report = parse(create_lines("1::1193::5::yesterday", "1::661::3::978302109"), "interactions")
    assert report.problems == [(1, "timestamp is not a number")]


def test_unknown_items_and_users_are_reported_by_line() -> None:
    lines = create_lines("1::1193::5::978300760", "1::9999::3::978302109", "7::1193::4::978298413")
    records, report = parse(lines, "interactions", known_items={"1193"}, known_users={"1"})
    assert len(records) == 1
    assert report.unknown_references == 2 and report.malformed == 0
    assert [n for n, _ in report.problems] == [2, 3]
    assert "item" in report.problems[0][1] and "user" in report.problems[1][1]


def test_csv_with_declared_mapping_keeps_its_own_format() -> None:
    mapping = mapping_from_dict(
        "items", {"columns": ["movieId", "title", "genres"], "roles": {"item_id": "movieId"}}, "csv"
    )
    lines = create_lines("movieId,title,genres,imdb", '11,"American President, The (1995)",Comedy,tt01', "12,x")
    records, report = parse(lines, "items", "csv", mapping)
    assert records[0].fields == ("11", "American President, The (1995)", "Comedy"), "only mapped columns, in order"
    assert format_line(records[0].fields, "csv") == '11,"American President, The (1995)",Comedy'
    assert report.problems == [(3, "expected 4 columns, found 2")]


def test_tsv_mapping_is_guessed_from_the_header_and_the_id_put_first() -> None:
    lines = create_lines("rating\tuserId\tmovieId\ttimestamp", "4\t1\t31\t1260759144")
    records, report = parse(lines, "interactions", "tsv", mapping_from_dict("interactions", None, "tsv"))
    assert report.mapping is not None and report.mapping.columns[0] == "userId"
    assert (records[0].user_id, records[0].item_id, records[0].timestamp) == ("1", "31", 1260759144)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"columns": ["movieId", "title"], "roles": {"item_id": "movie"}}, "mapping.roles"),
        ({"columns": ["title", "movieId"], "roles": {"item_id": "movieId"}}, "mapping.columns"),
        ({"columns": ["movieId"], "roles": {"item_id": "movieId", "rating": "movieId"}}, "mapping.roles"),
        ({"columns": ["movieId"], "roles": {}}, "mapping.roles"),
        ({"columns": [], "roles": {"item_id": "movieId"}}, "mapping.columns"),
        ({"cols": ["movieId"]}, "mapping"),
    ],
)
def test_unknown_or_inconsistent_mapping_names_the_field(raw: dict, field: str) -> None:
    with pytest.raises(DatasetError) as caught:
        mapping_from_dict("items", raw, "csv")
    assert caught.value.field == field, caught.value.message


def test_mapping_naming_a_column_absent_from_the_header_is_rejected() -> None:
    mapping = mapping_from_dict("items", {"columns": ["id", "name"], "roles": {"item_id": "id"}}, "csv")
    with pytest.raises(DatasetError, match="not in the header"):
        parse(create_lines("movieId,title", "1,Heat"), "items", "csv", mapping)


def test_csv_without_an_id_column_cannot_guess_the_mapping() -> None:
    with pytest.raises(DatasetError) as caught:
        parse(create_lines("name,genre", "Heat,Action"), "items", "csv", None)
    assert caught.value.field == "mapping.roles"


@pytest.mark.parametrize("fmt", ["movielens", "csv"])
def test_empty_file_is_an_error(fmt: str) -> None:
    with pytest.raises(DatasetError, match="empty|no valid records"):
        parse([], "items", fmt)


def test_file_of_only_malformed_lines_is_an_error_that_counts_them() -> None:
    with pytest.raises(DatasetError, match=r"2 malformed"):
        parse(create_lines("a", "b"), "items")


def test_dat_default_mapping_is_movielens() -> None:
    assert mapping_from_dict("users", None, "movielens") == MOVIELENS_MAPPINGS["users"]


def test_parsing_streams_without_reading_the_whole_file() -> None:
    def endless() -> Iterator[bytes]:
        for i in itertools.count(1):
            yield f"{i}::Film {i} (1999)::Drama\n".encode()

    report = ParseReport()
    records = parse_file(endless(), "items", "movielens", MOVIELENS_MAPPINGS["items"], report)
    first = list(itertools.islice(records, 5))
    assert [r.key for r in first] == ["1", "2", "3", "4", "5"]


def test_ids_are_stripped_and_must_be_plain() -> None:
    lines = create_lines("movieId,title", " 7 ,Heat (1995)", '"8,9",Casino (1995)', f"{'1' * 201},Long")
    records, report = parse(lines, "items", "csv", None)
    assert [r.key for r in records] == ["7"]
    assert format_line(records[0].fields, "csv") == "7,Heat (1995)", "the line starts with the id and delimiter"
    assert report.problems == [
        (3, "item_id contains a delimiter or a quote"),
        (4, "item_id is longer than 200 characters"),
    ]
