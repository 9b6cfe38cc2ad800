"""POST /batches without workers: roster validation (per-row report, nothing half-created), partial batches, the
quotas' 429, idempotency, uploads (CSV, JSON lines, a binary file, an oversized file), progress and cancellation."""

from __future__ import annotations

import json

from sqlalchemy import func, select

from app.db.engine import session_scope
from app.db.models import Audit, Subject
from app.db.models.batch import Batch

MODEL = "groundtruth-tiny"
SECRET = "Zyxwv Secretname"  # a name that must never come back in an error


def person(i: int, **extra) -> dict:
    return {"name": f"Batch Person {i}", "facts": [{"property": "P106", "value": "physicist"}], **extra}


def counts() -> tuple[int, int, int]:
    with session_scope() as s:
        return (
            s.scalar(select(func.count()).select_from(Batch)),
            s.scalar(select(func.count()).select_from(Audit)),
            s.scalar(select(func.count()).select_from(Subject)),
        )


MIXED_CSV = (
    "name,wikidata_id,P106,P27,fact\n"
    "Good Person One,Q42,physicist,France,\n"  # row 1: good
    ",,physicist,,\n"  # row 2: empty name
    "Good Person Two,,chemist,,P569=1950-01-01\n"  # row 3: good
    f'{SECRET},,=HYPERLINK("x"),,\n'  # row 4: formula in a cell
    f"{SECRET},,,,P999999=anything\n"  # row 5: unknown property
    f"{SECRET},,{'x' * 400},,\n"  # row 6: over-long value
    "Good Person One,Q42,physicist,France,\n"  # row 7: duplicate of row 1
    f"@{SECRET},,physicist,,\n"  # row 8: formula in the name
)
BAD_ROWS = {2: "name", 4: "P106", 5: "fact.property", 6: "P106.value", 7: "row", 8: "name"}


def test_a_mixed_roster_file_gets_a_per_row_report_and_creates_nothing(pg_env, api_factory):
    api = api_factory("auditor")
    before = counts()
    files = {"roster": ("people.csv", MIXED_CSV.encode(), "text/csv")}
    r = api.post("/batches", files=files, data={"model": MODEL})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["rows"] == 8 and body["rejected"] == 6
    by_row = {d["row"]: d["field"] for d in body["detail"] if d["row"] is not None}
    assert by_row == BAD_ROWS
    assert SECRET not in r.text and "HYPERLINK" not in r.text and "xxxx" not in r.text
    assert counts() == before, "a rejected roster creates nothing"

    r = api.post("/batches?partial=true", files=files, data={"model": MODEL})
    assert r.status_code == 202, r.text
    created = r.json()
    assert created["people"] == 2 and created["rejected"] == 6
    assert {e["row"] for e in created["errors"]} == set(BAD_ROWS)
    assert created["progress"] == {"queued": 2, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0, "total": 2}
    page = api.get(f"/batches/{created['id']}/audits").json()
    assert page["rows"] == [1, 3] and page["total"] == 2
    assert all(a["kind"] == "subject" and a["status"] == "queued" for a in page["items"])
    facts = api.get(f"/audits/{page['items'][1]['id']}").json()
    assert facts["model"] == MODEL
    with session_scope() as s:  # row 3's facts: the P106 column and the P569=… cell, normalised as a subject's
        subject = s.get(Subject, facts["subject_id"])
        assert subject.name == "Good Person Two"
        assert sorted((f.property_id, f.value) for f in subject.facts) == [
            ("P106", "chemist"),
            ("P569", "1 January 1950"),
        ]


def test_json_rosters_compare_models_and_replay_with_an_idempotency_key(pg_env, api_factory):
    api = api_factory("auditor")
    body = {
        "models": [MODEL, "smollm2-135m"],
        "options": {"paraphrases": 1},
        "people": [person(1), {"name": "Batch Person 2", "P106": ["chemist", "physicist"], "wikidata_id": "Q7"}],
    }
    first = api.post("/batches", json=body, headers={"Idempotency-Key": "k1"})
    assert first.status_code == 202, first.text
    again = api.post("/batches", json=body, headers={"Idempotency-Key": "k1"})
    assert again.status_code == 202 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    batch = first.json()
    assert batch["people"] == 2 and batch["progress"]["total"] == 4
    assert {m: c["total"] for m, c in batch["per_model"].items()} == {MODEL: 2, "smollm2-135m": 2}
    other = api.post("/batches", json={**body, "people": [person(3)]}, headers={"Idempotency-Key": "k1"})
    assert other.status_code == 409 and other.json()["detail"][0]["field"] == "Idempotency-Key"
    first_audit = api.get(batch["links"]["audits"]).json()["items"][0]["id"]
    assert api.get(f"/audits/{first_audit}").json()["options"]["paraphrases"] == 1
    # another auditor does not see the batch
    assert api_factory("auditor").get(f"/batches/{batch['id']}").status_code == 404


def test_bad_json_rows_and_bad_requests(pg_env, api_factory):
    api = api_factory("auditor")
    before = counts()
    people = [
        person(1),
        {"name": SECRET, "facts": []},
        {"name": SECRET, "P106": 5},
        {"name": SECRET, "nick": "x"},
        "not an object",
        {"name": SECRET, "wikidata_id": "42", "P106": "physicist"},
        person(1),
    ]
    r = api.post("/batches", json={"model": MODEL, "people": people})
    assert r.status_code == 422 and SECRET not in r.text
    by_row = {d["row"]: d["field"] for d in r.json()["detail"] if d["row"] is not None}
    assert by_row == {2: "facts", 3: "P106[0]", 4: "row", 5: "row", 6: "wikidata_id", 7: "row"}
    assert counts() == before
    r = api.post("/batches", json={"model": "no-such-model", "people": [person(1)]})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "models[0]"
    r = api.post("/batches", json={"model": MODEL, "models": [MODEL], "people": [person(1)]})
    assert r.status_code == 422
    assert api_factory("regulator").post("/batches", json={"model": MODEL, "people": [person(1)]}).status_code == 403


def test_quotas_answer_429_naming_the_limit(pg_env, api_factory, monkeypatch):
    from app.settings import get_settings

    api = api_factory("auditor")
    monkeypatch.setenv("MEMAUDIT_MAX_BATCH_SIZE", "3")
    monkeypatch.setenv("MEMAUDIT_MAX_ACTIVE_BATCH_AUDITS_PER_KEY", "5")
    get_settings.cache_clear()
    before = counts()
    r = api.post("/batches", json={"model": MODEL, "people": [person(i) for i in range(4)]})
    assert r.status_code == 429 and "MEMAUDIT_MAX_BATCH_SIZE" in r.text and "Retry-After" in r.headers
    assert api.post("/batches", json={"model": MODEL, "people": [person(i) for i in range(3)]}).status_code == 202
    r = api.post("/batches", json={"model": MODEL, "people": [person(i) for i in range(3, 6)]})
    assert r.status_code == 429 and "MEMAUDIT_MAX_ACTIVE_BATCH_AUDITS_PER_KEY" in r.text
    # a batch's audits do not count against the single-audit quota: a single audit still goes through
    single = {"kind": "subject", "model": MODEL, "subject": person(9)}
    assert api.post("/audits", json=single).status_code == 202
    assert counts()[0] == before[0] + 1
    get_settings.cache_clear()


def test_binary_and_oversized_files_are_refused_early(pg_env, api_factory):
    api = api_factory("auditor")
    binary = bytes(range(256)) * 64
    r = api.post("/batches", files={"roster": ("people.csv", binary, "text/csv")}, data={"model": MODEL})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "roster"
    latin = "name,P106\nJosé,physicist\n".encode("latin-1")
    r = api.post("/batches", files={"roster": ("people.csv", latin, "text/csv")}, data={"model": MODEL})
    assert r.status_code == 422 and "UTF-8" in r.text
    huge = b"name,P106\n" + b"A Person,physicist\n" * (26 * 1024 * 1024 // 19)  # over the 24 MiB request limit
    r = api.post("/batches", files={"roster": ("people.csv", huge, "text/csv")}, data={"model": MODEL})
    assert r.status_code == 413
    r = api.post(
        "/batches", files={"roster": ("people.csv", b"who,P106\nx,physicist\n", "text/csv")}, data={"model": MODEL}
    )
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "column 1"


def test_jsonl_upload_progress_and_cancel(pg_env, api_factory):
    api = api_factory("auditor")
    lines = "\n".join(json.dumps(person(i)) for i in range(5)).encode()
    r = api.post(
        "/batches",
        files={"roster": ("people.jsonl", lines, "application/x-ndjson")},
        data={"model": MODEL, "options": json.dumps({"paraphrases": 2})},
    )
    assert r.status_code == 202, r.text
    batch = r.json()
    assert batch["status"] == "queued" and batch["progress"]["queued"] == 5 and batch["eta_seconds"] is None
    cancelled = api.delete(f"/batches/{batch['id']}").json()
    assert cancelled["status"] == "cancelled" and cancelled["progress"]["cancelled"] == 5
    assert api.delete(f"/batches/{batch['id']}").status_code == 409


def test_hostile_rosters_answer_422_and_stay_bounded(pg_env, api_factory):
    """Inputs that crashed the reader (500) or expanded in memory: a CSV cell over csv's field limit, a JSON line
    nested 100,000 deep, one person with a million facts, a multipart upload naming 6 models (the JSON schema
    allows 5). Each is a 422 naming the place, and nothing is created."""
    from app.batches.roster import MAX_ITEMS_PER_ROW

    api = api_factory("auditor")
    before = counts()
    long_cell = b"name,P106\n" + b"A Person," + b"x" * 200_000 + b"\n"
    r = api.post("/batches", files={"roster": ("people.csv", long_cell, "text/csv")}, data={"model": MODEL})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "roster" and "line 2" in r.text, r.text
    deep = ("[" * 100_000 + "]" * 100_000 + "\n").encode()
    r = api.post("/batches", files={"roster": ("people.jsonl", deep, "application/jsonl")}, data={"model": MODEL})
    assert r.status_code == 422 and {d["row"]: d["field"] for d in r.json()["detail"] if d["row"]} == {1: "row"}
    many = {"model": MODEL, "people": [{"name": SECRET, "P106": ["physicist"] * 1_000_000}]}
    r = api.post("/batches", json=many)
    assert r.status_code == 422 and SECRET not in r.text
    messages = [d["message"] for d in r.json()["detail"] if d["row"] == 1]
    assert any(f"more than {MAX_ITEMS_PER_ROW} facts" in m for m in messages), messages
    six = {"model": [MODEL, *(f"m{i}" for i in range(5))]}  # the form field `model`, repeated
    r = api.post("/batches", files={"roster": ("people.csv", b"name,P106\nA Person,physicist\n", "text/csv")}, data=six)
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "models", r.text
    assert counts() == before


def test_the_model_comparison_is_bounded_like_the_cohorts(pg_env, api_factory, monkeypatch):
    from app.batches import report

    api = api_factory("auditor")
    body = {"models": [MODEL, "smollm2-135m"], "people": [person(i) for i in range(3)]}
    batch = api.post("/batches", json=body).json()
    assert api.get(f"/batches/{batch['id']}/report").json()["comparison"][0]["a"] == MODEL
    monkeypatch.setattr(report, "MAX_COHORT", 2)
    bounded = api.get(f"/batches/{batch['id']}/report").json()
    assert bounded["comparison"] == [] and any("comparison left out" in n for n in bounded["notes"])
    assert api.delete(f"/batches/{batch['id']}").status_code in (200, 202)
