"""A forget set cannot pass for complete when it is not: a whole jsonl export ends with its record count, and a
database failure mid-stream (its connection killed in PostgreSQL) cuts the HTTP response, which the client sees."""

from __future__ import annotations

import json

import httpx
import pytest
from sqlalchemy import text

from tests.conftest import make_key
from tests.support.stored import stored_subject_audit

RESULTS, FACTS_PER_RESULT, CANARIES = 24, 40, 40  # ~ 24 x 40 records of ~10 kB: far more than socket buffers
# every fact in: these audits have no null (the default policy, p-values, would hold them all as pending)
PARAMS = {"policy": "lenient"}


def create_large_audit(key: str) -> str:
    """A succeeded subject audit whose export is ~10 MB: every result has many facts and retrieving canaries."""
    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.db.models import Canary, Fact, FactResult
    from app.settings import get_settings

    with session_scope() as s:
        key_id = authenticate(s, get_settings(), key).key_id
        subject, audit = stored_subject_audit(s, key_id, "Stream Person " + "x" * 150, {"P106"})
        for r in range(RESULTS):
            facts = [
                Fact(property_id="P106", value=f"value {r}-{i} " + "v" * 200, source="request")
                for i in range(FACTS_PER_RESULT)
            ]
            subject.facts.extend(facts)
            s.flush()
            result = FactResult(
                audit_id=audit.id,
                property_id="P106",
                fact_ids=[f.id for f in facts],
                share=1.0,
                strict=True,
                lenient=True,
                z_star=1.0,
                n_templates=CANARIES,
            )
            result.canaries = [
                Canary(
                    template_index=t,
                    template="{subject} worked as {value} " + "t" * 100,
                    kind="paraphrase",
                    generic_subject="This person",
                    similar_names=["A", "B"],
                    rank=1,
                    lead_margin=1.0,
                    z_star=1.0,
                    memorized=True,
                )
                for t in range(CANARIES)
            ]
            s.add(result)
        return audit.id


@pytest.fixture
def large_export(live_api):
    api = live_api()
    key = make_key("auditor")
    return api, key, create_large_audit(key)


def test_a_complete_jsonl_export_ends_with_its_record_count(large_export):
    api, key, audit_id = large_export
    with api.client(key) as c:
        lines = c.get("/forget-set", params=PARAMS | {"audit_id": audit_id}).text.splitlines()
    assert json.loads(lines[-1]) == {"_end": {"records": RESULTS * FACTS_PER_RESULT}}
    assert len(lines) == RESULTS * FACTS_PER_RESULT + 1


def test_a_database_failure_mid_stream_cuts_the_response(large_export):
    from app.db.engine import session_scope

    api, key, audit_id = large_export
    received: list[str] = []
    with (
        api.client(key) as c,
        pytest.raises(httpx.RemoteProtocolError),  # "incomplete chunked read"
        c.stream("GET", "/forget-set", params=PARAMS | {"audit_id": audit_id}) as r,
    ):
        assert r.status_code == 200
        lines = r.iter_lines()
        received.append(next(lines))
        with session_scope() as s:  # kill every other connection to the database, the export's among them
            killed = s.scalar(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
        assert killed >= 1
        received.extend(lines)
    assert len(received) < RESULTS * FACTS_PER_RESULT, "the stream was not cut"
    assert not any(line.startswith('{"_end"') for line in received), "a cut stream must not carry the end marker"
    assert "failed: OperationalError" in api.log_text() and "Stream Person" not in api.log_text()
