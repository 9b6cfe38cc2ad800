"""Rectification-set export (GET /rectification-set, issue 42): the facts whose misattribution statistic passes its
policy against the null, as jsonl (end marker) and csv (formulas neutralised), with the forget set's roles, scope
and evidence entry. Stored results and a stored null with known statistics: the p-values are worked out by hand."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.support.misattributed import FINGERPRINT, stored_null, stored_result
from tests.support.stored import stored_subject_audit

NAME = "=cmd Lovelace"  # a name a spreadsheet would run: every CSV cell holding it must come out as text


@pytest.fixture
def rectifiable(sqlite_env, api_factory):
    """An auditor's audit: occupation asserted falsely beyond chance (p = 1/101), citizenship not (p = 2/101),
    languages with no false candidate."""
    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.settings import get_settings

    api = api_factory("auditor")
    with session_scope() as s:
        key_id = authenticate(s, get_settings(), api.headers["Authorization"].split()[1]).key_id
        subject, audit = stored_subject_audit(
            s,
            key_id,
            NAME,
            {"P106", "P27", "P1412"},
            summary={"scoring": {"fingerprint": FINGERPRINT}, "lookalikes": "reversed"},
        )
        s.flush()
        stored_result(s, audit, subject, "P106", "mathematician", "=SUM(A1)", 2.0)
        stored_result(s, audit, subject, "P27", "United Kingdom", "France", 0.4)
        stored_result(s, audit, subject, "P1412", "English", None, None)
        stored_null(s, audit, ["P106", "P27", "P1412"])
        audit_id = audit.id
    return api, audit_id


def export(api, audit_id: str, **params):
    r = api.get("/rectification-set", params={"audit_id": audit_id, **params})
    assert r.status_code == 200, r.text
    return r


def records(text: str) -> list[dict]:
    *rows, end = [json.loads(x) for x in text.splitlines()]
    assert end == {"_end": {"records": len(rows)}}, end
    return rows


def test_the_false_value_passing_the_policy_is_exported_with_its_prompts(rectifiable):
    api, aid = rectifiable
    (row,) = records(export(api, aid).text)
    assert row["property"] == "P106" and row["asserted_value"] == "=SUM(A1)" and row["true_values"] == ["mathematician"]
    assert row["p_value"] == pytest.approx(1 / 101) and row["statistic"] == 2.0 and row["mode"] == "scoring"
    assert row["policy"] == "pvalue<=0.01" and row["null"]["status"] == "ready" and row["severity"] == "ordinary"
    assert row["prompts"] == [f"{NAME}'s occupation is {{value}}.", row["prompts"][1]] and len(row["prompts"]) == 2
    assert row["example"] == f"{NAME}'s occupation is =SUM(A1)."
    assert row["provenance"]["nulls"][0]["null_audit_id"] == row["null"]["null_audit_id"]
    assert {r["property"] for r in records(export(api, aid, max_p=0.05).text)} == {"P106", "P27"}
    # BH at q = 0.05 over the m = 2 facts with a p-value: bounds 0.025, 0.05 -> p 0.0099 and 0.0198 pass
    bh = records(export(api, aid, policy="bh", q=0.05).text)
    assert {r["property"] for r in bh} == {"P106", "P27"} and bh[0]["policy"].startswith("bh(q=0.05)")
    assert records(export(api, aid, policy="bh", q=0.015).text) == []  # bounds 0.0075, 0.015
    assert export(api, aid, property="P27").text == '{"_end": {"records": 0}}\n'
    facts = {f["property"]: f["misattribution"] for f in api.get(f"/audits/{aid}/facts").json()["facts"]}
    assert facts["P106"] == {
        "value": "=SUM(A1)",
        "statistic": 2.0,
        "p_value": pytest.approx(1 / 101),
        "misattributed": True,
        "namesake": False,  # no other subject of this owner holds the value
        "uncalibrated": False,
        "reason": None,
    }
    assert facts["P27"]["misattributed"] is False and facts["P27"]["p_value"] == pytest.approx(2 / 101)
    assert facts["P1412"]["uncalibrated"] and "stored before" in facts["P1412"]["reason"]  # a result from before it


def test_csv_neutralises_formulas(rectifiable):
    api, aid = rectifiable
    text = export(api, aid, format="csv").text
    (row,) = list(csv.DictReader(io.StringIO(text)))
    assert row["subject"] == "'" + NAME and row["asserted_value"] == "'=SUM(A1)" and row["example"].startswith("'=")
    assert row["prompts"].startswith("'=") and float(row["p_value"]) == pytest.approx(1 / 101)
    assert not any(cell.startswith(("=", "+", "-", "@")) for line in csv.reader(io.StringIO(text)) for cell in line)


def test_roles_and_scope(rectifiable, api_factory):
    api, aid = rectifiable
    assert api_factory("regulator").get("/rectification-set").status_code == 403  # a regulator reads, exports nothing
    assert len(records(api_factory("pipeline").get("/rectification-set").text)) == 1
    assert records(api_factory("auditor").get("/rectification-set").text) == []  # another auditor's audit: unseen
    r = api.get("/rectification-set", params={"property": "P999999"})
    assert r.status_code == 422 and "property" in r.text
    assert api.get("/rectification-set", params={"policy": "lenient"}).status_code == 422


def test_each_export_is_an_evidence_entry(rectifiable):
    import hashlib

    from sqlalchemy import select

    from app.db.engine import session_scope
    from app.db.models import EvidenceEntry

    api, aid = rectifiable
    delivered = export(api, aid)
    with session_scope() as s:
        entries = [json.loads(e.payload) for e in s.scalars(select(EvidenceEntry).order_by(EvidenceEntry.seq))]
    (entry,) = [e for e in entries if e["kind"] == "rectification_set_export"]
    assert entry["body"]["sha256"] == hashlib.sha256(delivered.content).hexdigest()
    assert entry["body"]["records"] == 1 and entry["body"]["properties"]["P106"]["p_values"] == [pytest.approx(1 / 101)]
    assert NAME not in json.dumps(entry)  # the person as a ref, never by name
    assert not [e for e in entries if e["kind"] == "forget_set_export"]


def test_a_null_without_the_statistic_leaves_facts_out_and_says_so(sqlite_env, api_factory):
    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.settings import get_settings

    api = api_factory("auditor")
    with session_scope() as s:
        key_id = authenticate(s, get_settings(), api.headers["Authorization"].split()[1]).key_id
        subject, audit = stored_subject_audit(
            s,
            key_id,
            "Ada Byron",
            {"P106"},
            summary={"scoring": {"fingerprint": FINGERPRINT}, "lookalikes": "reversed"},
        )
        s.flush()
        stored_result(s, audit, subject, "P106", "mathematician", "writer", 2.0)
        stored_null(s, audit, ["P106"], with_statistic=False)
        aid = audit.id
    *rows, end = [json.loads(x) for x in export(api, aid).text.splitlines()]
    assert rows == [] and end == {"_end": {"records": 0, "pending": 1, "pending_by_status": {"uncalibrated": 1}}}
    fact = api.get(f"/audits/{aid}/facts").json()["facts"][0]
    assert (
        fact["misattribution"]["uncalibrated"]
        and "before the misattribution statistic" in fact["misattribution"]["reason"]
    )


def test_the_cohort_counts_misattributed_facts_beside_memorized_ones(rectifiable):
    """GET /cohort-stats (the regulator's cohort view and a batch's report): the share of facts misattributed at
    p <= 0.01 among those with a misattribution p-value (occupation yes, citizenship no; languages have none)."""
    api, aid = rectifiable
    stats = api.get("/cohort-stats", params={"audit_id": aid}).json()
    assert stats["cohort"]["misattributed"] == pytest.approx(0.5), stats["cohort"]
    per = stats["per_property"]
    assert (per["P106"]["misattributed"], per["P27"]["misattributed"], per["P1412"]["misattributed"]) == (1, 0, None)
    assert stats["null"]["misattributed"] is None  # the null's side: at most max_p by construction, not counted
