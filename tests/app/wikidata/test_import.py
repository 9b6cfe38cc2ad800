"""`memaudit import-wikidata`: a dump fragment yields the expected subjects, facts, metadata and pools; bad
lines are counted and skipped; an interrupted import resumes without duplicates; re-imports add nothing."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from tests.app.wikidata.dump_fragment import dump_lines, fragment, write_dump


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_db(request, tmp_path, monkeypatch):
    """An empty migrated database per test, SQLite and Postgres (imports are counted: tests must not share one)."""
    import uuid

    from app.migrate import migrate
    from app.settings import get_settings

    if request.param == "postgres":
        url = request.getfixturevalue("postgres").create_database(f"import_{uuid.uuid4().hex[:8]}")
    else:
        url = f"sqlite:///{tmp_path / 'import.sqlite3'}"
    monkeypatch.setenv("MEMAUDIT_DATABASE_URL", url)
    get_settings.cache_clear()
    migrate(url)
    yield url
    get_settings.cache_clear()


def dump_subjects() -> dict[str, tuple[str, list[tuple[str, str]]]]:
    from app.db.engine import session_scope
    from app.db.models import Subject

    with session_scope() as s:
        rows = s.scalars(select(Subject).where(Subject.owner_key_id.is_(None)))
        return {r.wikidata_id: (r.name, sorted((f.property_id, f.value) for f in r.facts)) for r in rows}


def test_importing_a_fragment_stores_humans_facts_metadata_and_pools(fresh_db, tmp_path):
    from app.db.engine import session_scope
    from app.db.models import WikidataProperty
    from app.wikidata.importer import import_dump
    from app.wikidata.repository import latest_pool

    path = write_dump(tmp_path / "dump.json.bz2", dump_lines(fragment(), bad={5: "{truncated"}))
    report = import_dump(path, batch_size=50)
    assert report.humans == 121 and report.skipped_humans == 0, report
    assert report.bad_lines == 1 and report.bad_line_numbers == [7], report  # '[' + 5 entities, then the bad one
    subjects = dump_subjects()
    assert len(subjects) == 121
    name, facts = subjects["Q42"]
    assert name == "Douglas Adams"
    assert ("P106", "novelist") in facts and ("P2048", "196 centimetres") in facts
    assert subjects["Q1000002"] == ("Person 2", [("P106", "scientist")])
    assert report.pools == {"P106": 5}, "only P106 is used by >= 100 humans in the fragment"
    with session_scope() as s:
        pool = latest_pool(s, "P106")
        assert pool[:3] == ["actor", "politician", "scientist"], pool  # most frequent first (41, 40, 40)
        assert set(pool[3:]) == {"novelist", "screenwriter"}
        assert latest_pool(s, "P27") == []
        assert s.get(WikidataProperty, "P106").aliases == ["job"]


def test_an_interrupted_import_resumes_after_its_last_batch(fresh_db, tmp_path):
    from app.wikidata.importer import import_dump

    path = write_dump(tmp_path / "dump.json", dump_lines(fragment()))

    class Crash(Exception):
        pass

    def crash_after_two_batches(stored: int) -> None:
        if stored >= 60:
            raise Crash

    with pytest.raises(Crash):
        import_dump(path, batch_size=30, on_batch=crash_after_two_batches)
    assert len(dump_subjects()) == 60, "two committed batches survive the crash"
    report = import_dump(path, batch_size=30)
    assert report.resumed_after_line > 0 and report.humans == 121, report
    assert len(dump_subjects()) == 121, "no human twice, none lost"


def test_reimporting_the_same_humans_adds_nothing(fresh_db, tmp_path):
    from app.db.engine import session_scope
    from app.db.models import Fact
    from app.wikidata.importer import import_dump

    first = write_dump(tmp_path / "a.json", dump_lines(fragment()))
    import_dump(first)
    second = write_dump(tmp_path / "b.json.gz", dump_lines(fragment()))
    report = import_dump(second)
    assert report.humans == 0 and report.skipped_humans == 121, report
    with session_scope() as s:
        assert s.scalar(select(func.count()).select_from(Fact)) == sum(len(f) for _, f in dump_subjects().values())


def test_cli_prints_a_report_and_counts_bad_lines(fresh_db, tmp_path, capsys):
    from app.cli import main

    path = write_dump(tmp_path / "dump.json", dump_lines(fragment(), bad={3: "garbage"}))
    assert main(["import-wikidata", str(path), "--batch-size", "40"]) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert report["humans"] == 121 and report["bad_lines"] == 1, report
    assert "skipped 1 unreadable line(s): 5" in out.err
    assert "Douglas" not in out.out + out.err, "reports carry counts, never names"
    assert main(["import-wikidata", str(tmp_path / "missing.json")]) == 2
