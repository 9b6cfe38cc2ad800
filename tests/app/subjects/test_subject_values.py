"""Subject audits over the API on real Postgres: dates and quantities are stored in the catalog's spelling
(the same normaliser the Wikidata importer uses), bad ones and names without letters are 422s naming the field."""

from __future__ import annotations

import pytest


def body(name: str = "Test Person", facts=None) -> dict:
    facts = facts or [{"property": "P106", "value": "physicist"}]
    return {"kind": "subject", "model": "groundtruth-tiny", "subject": {"name": name, "facts": facts}}


@pytest.fixture
def auditor(pg_env, api_factory):
    return api_factory("auditor")


def stored_facts(audit_id: str) -> list[tuple[str, str]]:
    from app.db.engine import session_scope
    from app.db.models import Audit, Subject

    with session_scope() as s:
        subject = s.get(Subject, s.get(Audit, audit_id).subject_id)
        return sorted((f.property_id, f.value) for f in subject.facts)


def test_dates_and_quantities_are_stored_normalised(auditor):
    facts = [
        {"property": "P2048", "value": "1.962 m"},
        {"property": "P2067", "value": "72.5 kg"},
        {"property": "P569", "value": "1879-03-14"},
        {"property": "P570", "value": "April 1955"},
        {"property": "P106", "value": "  theoretical  physicist "},
    ]
    r = auditor.post("/audits", json=body(facts=facts))
    assert r.status_code == 202, r.text
    assert stored_facts(r.json()["id"]) == [
        ("P106", "theoretical physicist"),
        ("P2048", "196.2 centimetres"),
        ("P2067", "72.5 kilograms"),
        ("P569", "14 March 1879"),
        ("P570", "April 1955"),
    ]


@pytest.mark.parametrize(
    ("facts", "words"),
    [
        ([{"property": "P2048", "value": "196 stone"}], "unit is not understood"),
        ([{"property": "P1971", "value": "2.5"}], "whole number"),
        ([{"property": "P569", "value": "31 February 1879"}], "expects a date"),
    ],
)
def test_bad_quantities_and_dates_name_the_field(auditor, facts, words):
    r = auditor.post("/audits", json=body(facts=facts))
    assert r.status_code == 422, r.text
    [detail] = r.json()["detail"]
    assert detail["field"] == "subject.facts[0].value" and words in detail["message"], detail
    assert facts[0]["value"] not in r.text, "never echoes the value"


@pytest.mark.parametrize("name", ["\u200b\u200b\u200b", "😀 😀", "123 456", "-- .."])
def test_a_name_without_letters_is_refused(auditor, name):
    r = auditor.post("/audits", json=body(name=name))
    assert r.status_code == 422, r.text
    [detail] = r.json()["detail"]
    assert detail["field"] == "subject.name" and "no letters" in detail["message"], detail
    assert name not in r.text
