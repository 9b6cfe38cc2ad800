"""POST /audits with a Wikidata id: facts come from an imported dump or the (loopback) Wikidata API."""

from __future__ import annotations

import socket

import pytest
from sqlalchemy import select

from tests.app.wikidata.fake_server import FakeWikidata

MODEL = "hf:/nonexistent/model-dir"  # the job is not under test here: it fails fast and harmlessly


@pytest.fixture
def wikidata(sqlite_env, monkeypatch):
    from app.settings import get_settings

    fake = FakeWikidata().start()
    monkeypatch.setenv("MEMAUDIT_WIKIDATA_API_URL", fake.url)
    get_settings.cache_clear()
    yield fake
    fake.stop()
    get_settings.cache_clear()


def post(api, subject: dict):
    return api.post("/audits", json={"kind": "subject", "model": MODEL, "subject": subject})


def stored_subject(audit_id: str):
    from app.db.engine import session_scope
    from app.db.models import Audit, Subject

    with session_scope() as s:
        subject = s.get(Subject, s.get(Audit, audit_id).subject_id)
        return subject.name, subject.wikidata_id, sorted((f.property_id, f.value, f.source) for f in subject.facts)


def test_a_wikidata_id_alone_fetches_name_and_catalog_facts(wikidata, api_factory):
    r = post(api_factory("auditor"), {"wikidata_id": "Q42"})
    assert r.status_code == 202, r.text
    name, qid, facts = stored_subject(r.json()["id"])
    assert (name, qid) == ("Douglas Adams", "Q42")
    assert ("P106", "novelist", "wikidata") in facts and ("P569", "11 March 1952", "wikidata") in facts
    assert len(facts) == 9, facts


def test_request_facts_win_over_wikidata(wikidata, api_factory):
    r = post(
        api_factory("auditor"),
        {"wikidata_id": "Q42", "name": "D. Adams", "facts": [{"property": "P106", "value": "novelist"}]},
    )
    assert r.status_code == 202, r.text
    assert stored_subject(r.json()["id"]) == ("D. Adams", "Q42", [("P106", "novelist", "request")])
    assert wikidata.requests == [], "no Wikidata call when the request brings its facts"


@pytest.mark.parametrize(("qid", "message"), [("Q64", "not a human"), ("Q999999999", "no entity")])
def test_non_humans_and_missing_entities_are_a_422_naming_the_field(wikidata, api_factory, qid, message):
    r = post(api_factory("auditor"), {"wikidata_id": qid})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["field"] == "subject.wikidata_id" and message in detail["message"], detail


def test_neither_facts_nor_wikidata_id_is_a_422(wikidata, api_factory):
    r = post(api_factory("auditor"), {"name": "Someone"})
    assert r.status_code == 422
    fields = [d["field"] for d in r.json()["detail"]]
    assert len(fields) == 1 and fields[0].endswith("subject.facts"), fields


def test_unreachable_wikidata_is_a_503(sqlite_env, monkeypatch, api_factory):
    from app.settings import get_settings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MEMAUDIT_WIKIDATA_API_URL", f"http://127.0.0.1:{port}/w/api.php")
    get_settings.cache_clear()
    r = post(api_factory("auditor"), {"wikidata_id": "Q42"})
    assert r.status_code == 503, r.text
    assert "unreachable" in r.json()["detail"][0]["message"]
    get_settings.cache_clear()


def test_an_imported_dump_subject_is_used_without_calling_the_api(wikidata, api_factory):
    from app.db.engine import session_scope
    from app.db.models import Fact, Subject
    from app.wikidata.repository import ensure_properties

    with session_scope() as s:
        ensure_properties(s, {"P106", "P27"})
        if s.scalar(select(Subject.id).where(Subject.wikidata_id == "Q7251")) is None:
            person = Subject(name="Alan Turing", wikidata_id="Q7251", owner_key_id=None)
            person.facts = [
                Fact(property_id="P106", value="mathematician", source="dump"),
                Fact(property_id="P27", value="United Kingdom", source="dump"),
            ]
            s.add(person)
    r = post(api_factory("auditor"), {"wikidata_id": "Q7251"})
    assert r.status_code == 202, r.text
    name, _, facts = stored_subject(r.json()["id"])
    assert name == "Alan Turing"
    assert facts == [("P106", "mathematician", "dump"), ("P27", "United Kingdom", "dump")]
    assert wikidata.requests == []


def test_cli_audit_needs_facts_or_a_wikidata_id(sqlite_env, capsys):
    from app.cli import main

    assert main(["audit", "--name", "Someone"]) == 2
    assert "--wikidata-id" in capsys.readouterr().err
    assert main(["audit", "--fact", "P106=physicist"]) == 2
    assert "--name" in capsys.readouterr().err


def test_a_date_for_occupation_is_a_422_naming_the_value(sqlite_env, api_factory):
    r = post(api_factory("auditor"), {"name": "Someone", "facts": [{"property": "P106", "value": "1879-03-14"}]})
    assert r.status_code == 422
    detail = r.json()["detail"][0]
    assert detail["field"].endswith("subject.facts[0].value") and "1879" not in detail["message"], detail
