"""Streaming the official JSON dump format: humans, facts, property metadata, pools, and bad lines."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from app.wikidata.dump import DumpReader, resolve
from app.wikidata.snaks import ItemRef
from core.catalog import load_catalog
from tests.app.wikidata.dump_fragment import dump_lines, fragment, write_dump


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def read_all(path: Path, catalog) -> tuple[DumpReader, list]:
    reader = DumpReader(path, catalog.pids, {p.pid: p.value_type for p in catalog})
    return reader, list(reader.humans())


@pytest.mark.parametrize("suffix", [".json", ".json.gz", ".json.bz2"])
def test_reads_humans_facts_properties_and_pools_in_every_compression(tmp_path, catalog, suffix):
    path = write_dump(tmp_path / f"dump{suffix}", dump_lines(fragment()))
    reader, humans = read_all(path, catalog)
    assert [h.qid for h in humans[:2]] == ["Q42", "Q1000000"], "humans come out in file order"
    assert len(humans) == 121, f"Douglas Adams + 120 fictitious humans, got {len(humans)}"
    assert reader.report.humans == 122 and reader.report.humans_without_label == 1
    assert reader.report.bad_lines == 0, reader.report
    assert reader.properties["P106"].label == "occupation" and reader.properties["P106"].aliases == ("job",)

    adams = humans[0]
    assert ("P106", ItemRef("Q6625963")) in adams.facts and ("P569", "11 March 1952") in adams.facts
    assert all(pid in catalog for pid, _ in adams.facts), "only catalog properties are kept"
    assert not any(pid == "P31" for pid, _ in adams.facts), "P31 is how humans are found, not a fact"

    assert reader.humans_per_property["P106"] == 121
    assert reader.value_counts["P106"][ItemRef("Q901")] == 40
    names = reader.labels(reader.referenced_items())
    assert names["Q901"] == "scientist" and names["Q145"] == "United Kingdom"
    pools = reader.pools(names)
    assert set(pools["P106"]) >= {"scientist", "actor", "politician"}, pools["P106"]
    assert "P27" not in pools, "P27 is used by only 41 humans here: below the 100-human threshold"
    assert resolve(humans[1].facts, names) == [("P27", "United Kingdom"), ("P106", "actor")]


def test_bad_and_truncated_lines_are_counted_with_line_numbers_and_skipped(tmp_path, catalog):
    lines = dump_lines(fragment(), bad={1: '{"type": "item", "id": "Q7", "claims": {', 3: "not json at all"})
    lines[-2] = lines[-2][: len(lines[-2]) // 2]  # the last entity is cut in the middle
    path = write_dump(tmp_path / "broken.json", lines)
    reader, humans = read_all(path, catalog)
    assert reader.report.bad_lines == 3, reader.report
    assert reader.report.bad_line_numbers == [3, 5, len(lines) - 1], reader.report.bad_line_numbers
    assert len(humans) == 121, "every good line is still read"


def test_a_gzip_cut_short_stops_cleanly_and_reports_it(tmp_path, catalog):
    whole = gzip.compress(("\n".join(dump_lines(fragment())) + "\n").encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(whole[: len(whole) * 2 // 3])
    reader, humans = read_all(path, catalog)
    assert reader.report.truncated and reader.report.bad_lines >= 1, reader.report
    assert 0 < len(humans) < 121, f"the part before the cut is read: {len(humans)} humans"


def test_resuming_after_a_line_skips_what_was_already_read(tmp_path, catalog):
    path = write_dump(tmp_path / "dump.json", dump_lines(fragment()))
    _, humans = read_all(path, catalog)
    resume_after = humans[59].line_number
    reader = DumpReader(path, catalog.pids, {p.pid: p.value_type for p in catalog})
    rest = list(reader.humans(start_line=resume_after))
    assert [h.qid for h in rest] == [h.qid for h in humans[60:]]
