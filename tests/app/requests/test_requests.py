"""A person's request through the API (issue 43) on the embedded SQLite store, with the clock frozen through
FastAPI's dependency override of app.requests.router.clock: the calendar-month deadline, the officer's queue on
days 0, 29, 30 (overdue), an extension, 89, 90 and 91; who may see and act; one evidence entry per step and no name
in any; bad input names its field."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from app.db.engine import session_scope
from app.db.models.evidence import EvidenceEntry
from app.requests.router import clock
from app.requests.service import add_months

NAME = "Wilhelmina Quartermaine"
T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)  # April has 30 days: one month later is day 30


def body(**over) -> dict:
    base = {
        "subject": {"name": NAME, "facts": [{"property": "P106", "value": "cartographer"}]},
        "rights": ["access", "erasure"],
        "models": ["groundtruth-tiny"],
        "received_at": T0.isoformat(),
    }
    return base | over


class Clock:
    def __init__(self, api) -> None:  # noqa: ANN001
        self.now = T0
        api.client.app.dependency_overrides[clock] = lambda: self.now

    def day(self, n: int) -> None:
        self.now = T0 + timedelta(days=n)


@pytest.fixture
def officer(sqlite_env, api_factory):  # noqa: ANN001, ANN201
    api = api_factory("auditor")
    return api, Clock(api)


def test_calendar_months() -> None:
    assert add_months(T0, 1) == datetime(2026, 5, 1, 9, tzinfo=UTC)
    assert add_months(datetime(2027, 1, 31, tzinfo=UTC), 1) == datetime(2027, 2, 28, tzinfo=UTC), "no 31 February"
    assert add_months(datetime(2028, 1, 31, tzinfo=UTC), 1) == datetime(2028, 2, 29, tzinfo=UTC), "a leap year"
    assert add_months(datetime(2026, 11, 30, tzinfo=UTC), 3) == datetime(2027, 2, 28, tzinfo=UTC)
    assert add_months(datetime(2026, 12, 15, 23, 59, tzinfo=UTC), 1) == datetime(2027, 1, 15, 23, 59, tzinfo=UTC)


def queue(api) -> dict[str, dict]:  # noqa: ANN001
    answer = api.get("/requests")
    assert answer.status_code == 200, answer.text
    return {row["id"]: row for row in answer.json()["items"]}


def test_frozen_clock_walk_through_the_deadline(officer) -> None:  # noqa: ANN001
    api, clock_ = officer
    made = api.post("/requests", json=body())
    assert made.status_code == 201, made.text
    extended, late = made.json(), api.post("/requests", json=body()).json()
    assert extended["received_at"] == "2026-04-01T09:00:00Z" and extended["due_at"] == "2026-05-01T09:00:00Z"
    assert extended["state"] == "received" and extended["days_left"] == 30

    walk = {}
    for day in (0, 29):
        clock_.day(day)
        walk[day] = queue(api)
        assert not walk[day][late["id"]]["overdue"] and walk[day][late["id"]]["days_left"] == 30 - day
    answer = api.post(f"/requests/{extended['id']}/extension", json={"reason": "The model's owner must rerun it."})
    assert answer.status_code == 200, answer.text
    assert answer.json()["due_at"] == "2026-07-01T09:00:00Z", "received + 3 calendar months"
    again = api.post(f"/requests/{extended['id']}/extension", json={"reason": "And once more, please, thanks."})
    assert again.status_code == 409 and "one extension" in again.text

    clock_.day(30)
    walk[30] = queue(api)
    assert walk[30][late["id"]]["overdue"], "day 30: one calendar month has run out"
    assert not walk[30][extended["id"]]["overdue"] and walk[30][extended["id"]]["days_left"] == 61
    refused = api.post(f"/requests/{late['id']}/extension", json={"reason": "Too late for an extension now."})
    assert refused.status_code == 409 and "within one month" in refused.text, "Art. 12(3): tell it within the month"
    for day, left in ((89, 2), (90, 1), (91, 0)):  # 1 July 09:00 is day 91 (April 30 + May 31 + June 30 days)
        clock_.day(day)
        row = queue(api)[extended["id"]]
        assert row["days_left"] == left and row["overdue"] is (day == 91), (day, row)
    clock_.day(91)
    page = {r["id"]: r for r in api.get("/requests", params={"open": "true"}).json()["items"]}
    assert set(page) == {late["id"], extended["id"]} and all(r["overdue"] for r in page.values())


def test_states_refusal_and_who_sees(officer, api_factory) -> None:  # noqa: ANN001
    api, _ = officer
    made = api.post("/requests", json=body(identity_check="verified")).json()
    assert made["state"] == "identity_checked"
    failed = api.post("/requests", json=body()).json()
    checked = api.post(f"/requests/{failed['id']}/identity", json={"status": "failed"})
    assert checked.status_code == 200 and checked.json()["state"] == "refused"
    assert checked.json()["refusal_reason"]
    answer = api.post(f"/requests/{made['id']}/answer")
    assert answer.status_code == 409 and "audits" in answer.text, "nothing audited: nothing to answer with"

    other = api_factory("auditor")
    assert other.get(f"/requests/{made['id']}").status_code == 404, "another principal's request is a 404"
    assert made["id"] not in queue(other)
    assert other.post(f"/requests/{made['id']}/refusal", json={"reason": "Not mine to refuse here."}).status_code == 404
    regulator = api_factory("regulator")
    assert regulator.get(f"/requests/{made['id']}").status_code == 200, "a regulator reads"
    assert regulator.post("/requests", json=body()).status_code == 403, "and does not act"
    assert api_factory("pipeline").get("/requests").status_code == 403


def test_bad_input_names_the_field(officer) -> None:  # noqa: ANN001
    api, _ = officer
    cases = {
        "received_at": body(received_at="2026-04-01T09:00:00"),
        "rights": body(rights=["forget"]),
        "models": body(models=[]),
        "subject": body(subject={"name": NAME}),
    }
    for field, sent in cases.items():
        answer = api.post("/requests", json=sent)
        assert answer.status_code == 422, (field, answer.text)
        assert field in answer.text, (field, answer.text)
        assert NAME not in answer.text
    future = api.post("/requests", json=body(received_at="2030-01-01T00:00:00Z"))
    assert future.status_code == 422 and "received_at" in future.text
    unknown = api.post("/requests", json=body(models=["no-such-model"]))
    assert unknown.status_code == 422 and "models[0]" in unknown.text


def test_one_evidence_entry_per_step_and_no_name(officer) -> None:  # noqa: ANN001
    api, clock_ = officer
    made = api.post("/requests", json=body()).json()
    api.post(f"/requests/{made['id']}/identity", json={"status": "verified"})
    api.post(f"/requests/{made['id']}/extension", json={"reason": f"{NAME} sent more facts."})
    clock_.day(40)
    api.post(f"/requests/{made['id']}/refusal", json={"reason": f"{NAME} withdrew the request."})
    with session_scope() as s:
        rows = list(s.scalars(select(EvidenceEntry).order_by(EvidenceEntry.seq)))
        kinds = [r.kind for r in rows]
        text = " ".join(r.payload for r in rows)
    assert kinds == ["request_received", "request_identity_checked", "request_extended", "request_refused"], kinds
    for part in (NAME, *NAME.split(), "cartographer", "withdrew"):
        assert part not in text, f"personal data or free text in the evidence record: {part!r}"


def test_migration_matches_the_request_models(tmp_path) -> None:  # noqa: ANN001
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import create_engine

    from app.db.base import Base
    from app.migrate import migrate

    url = f"sqlite:///{tmp_path / 'schema.sqlite3'}"
    migrate(url)
    with create_engine(url).connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    tables = ("requests", "request_audits", "recipients", "deliveries")
    ours = [d for d in diffs if any(f"'{t}'" in repr(d) or f"table={t}" in repr(d) for t in tables)]
    assert ours == [], ours


def test_the_cli_is_the_api_client(sqlite_env, capsys) -> None:  # noqa: ANN001
    from app.cli import main as cli

    args = ["requests", "create", "--name", NAME, "--fact", "P106=cartographer", "--right", "access"]
    assert cli([*args, "--model", "groundtruth-tiny", "--received-at", "2026-04-01T09:00:00Z"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["due_at"] == "2026-05-01T09:00:00Z" and made["state"] == "received"
    assert cli(["requests", "list"]) == 0
    listed = capsys.readouterr().out
    assert made["id"][:8] in listed and "overdue" in listed, "received in April 2026: overdue by now"
    assert cli(["requests", "extend", made["id"], "--reason", "too late"]) != 0
    assert "reason" in capsys.readouterr().err, "the API's 422 names the field"
