"""Input the database cannot store is a 422 naming the field, never a 500 and never an echo: NUL characters in
bodies, paths and query strings, NaN/Infinity in JSON, integers beyond 64 bits, on real Postgres."""

from __future__ import annotations

import json

import pytest

SUBJECT = {
    "kind": "subject",
    "model": "groundtruth-tiny",
    "subject": {"name": "Input Person", "facts": [{"property": "P106", "value": "physicist"}]},
}
CAPACITY = {
    "kind": "capacity",
    "model": "scratch",
    "grid": {"architectures": [{"n_layer": 1, "d_model": 8}], "vocab_size": 16, "seq_len": 8, "dataset_sizes": [8]},
}
HUGE = 2**70


@pytest.fixture
def auditor(pg_env, api_factory):
    return api_factory("auditor")


def with_subject(**changes) -> dict:
    return {**SUBJECT, "subject": {**SUBJECT["subject"], **changes}}


def fields(response) -> list[str]:
    return [d["field"] for d in response.json()["detail"]]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (with_subject(name="Ada\x00Nulname"), "subject.name"),
        (with_subject(facts=[{"property": "P106", "value": "phys\x00icist"}]), "subject.facts[0].value"),
        (with_subject(facts=[{"property": "P1\x0006", "value": "physicist"}]), "subject.facts[0].property"),
        ({**SUBJECT, "model": "groundtruth-tiny\x00"}, "model"),
        ({**SUBJECT, "options": {"seed": HUGE}}, "options.seed"),
        ({**CAPACITY, "options": {"checkpoint_seconds": float("inf")}}, "options.checkpoint_seconds"),
        ({**CAPACITY, "options": {"lr": float("nan")}}, "options.lr"),
        ({**CAPACITY, "grid": {**CAPACITY["grid"], "dataset_sizes": [HUGE]}}, "grid.dataset_sizes"),
    ],
)
def test_unstorable_bodies_are_422_naming_the_field(auditor, payload, field):
    raw = json.dumps(payload)  # Python writes NaN and Infinity as the bare JSON words a hostile client sends
    r = auditor.post("/audits", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert field in fields(r), r.json()
    assert "Nulname" not in r.text and str(HUGE) not in r.text


@pytest.mark.parametrize(
    ("method", "url", "field"),
    [
        ("get", f"/audits?subject_id={HUGE}", "subject_id"),
        ("get", f"/audits?page={HUGE}", "page"),
        ("get", "/audits?page=3000000000", "page"),
        ("delete", f"/subjects/{HUGE}", "subject_id"),
        ("delete", "/subjects/0", "subject_id"),
        ("get", "/audits?model=tiny%00", "model"),
        ("get", "/audits/abc%00def", "path"),
        ("get", "/audits/abc%00def/facts", "path"),
        ("get", "/forget-set?property=P1%0006", "property"),
        ("get", f"/forget-set?subject_id={HUGE}", "subject_id"),
        ("get", "/forget-set?min_z=Infinity", "min_z"),
        ("get", "/forget-set?min_z=nan", "min_z"),
        ("get", "/audits/abc/strings?tau=inf", "tau"),
        ("get", "/audits?%00odd=1", "query"),
    ],
)
def test_unstorable_parameters_are_422_naming_the_parameter(auditor, method, url, field):
    r = getattr(auditor, method)(url)
    assert r.status_code == 422, r.text
    assert fields(r) == [field] or field in fields(r), r.json()
    assert str(HUGE) not in r.text and "odd" not in r.text


def test_in_range_ids_that_do_not_exist_are_404(auditor):
    assert auditor.delete(f"/subjects/{2**31 - 1}").status_code == 404
    assert auditor.get(f"/audits?subject_id={2**31 - 1}").json()["total"] == 0
    assert auditor.delete(f"/subjects/{2**31}").status_code == 422, "subject ids are 32-bit"
