"""Rectification-set export (GET /rectification-set, issue 42): the facts whose misattribution statistic passes its
policy against the null, as jsonl (end marker) and csv (formulas neutralised), with the forget set's roles, scope
and evidence entry. Stored results and a stored null with known statistics: the p-values are worked out by hand."""

from __future__ import annotations

import csv
import io
import json
import uuid

import pytest

from tests.support.stored import stored_subject_audit

FINGERPRINT = "e" * 64
NAME = "=cmd Lovelace"  # a name a spreadsheet would run: every CSV cell holding it must come out as text


def stored_result(s, audit, subject, pid: str, truth: str, wrong: str | None, statistic: float | None):
    """A fact with a baseline and a paraphrase canary, whose best false value ``wrong`` has ``statistic``."""
    from app.db.models import Canary, CandidateScore, Fact, FactResult
    from core.catalog import load_catalog

    fact = Fact(property_id=pid, value=truth, source="request")
    subject.facts.append(fact)
    s.flush()
    prop = load_catalog().get(pid)
    result = FactResult(
        audit_id=audit.id,
        property_id=pid,
        fact_ids=[fact.id],
        share=0.0,
        strict=False,
        lenient=False,
        z_star=None,
        n_templates=2,
        statistic=-0.5,
        n_values=1,
        in_pool=True,
        misattribution=statistic,
        misattributed_value=wrong,
    )
    for i, kind in enumerate(("baseline", "paraphrase")):
        canary = Canary(
            template_index=i,
            template=prop.templates[i],
            kind=kind,
            generic_subject="This person",
            similar_names=["X", "Y"],
            rank=2,
            lead_margin=-1.0,
            z_star=None,
            memorized=False,
        )
        scores = [(wrong or "v", False, 1.0), (truth, True, 0.0)]
        canary.candidates = [
            CandidateScore(
                value=v, is_ground_truth=g, nll_subject=1.0, nll_generic=None, nll_similar=[1.0], score=sc, rank=r + 1
            )
            for r, (v, g, sc) in enumerate(scores)
        ]
        result.canaries.append(canary)
    s.add(result)


def stored_null(s, audit, pids: list[str], with_statistic: bool = True) -> None:
    """A finished null of the audit's configuration: per property 100 fictitious facts, misattribution 0.5 for one
    and -1.0 for the others (None: a null from before the statistic)."""
    from app.db.models import Audit, NullDistribution, NullFact
    from app.nulls.calibrate import Calibrator

    null = Audit(id=uuid.uuid4().hex, kind="null", model=audit.model, options={}, status="succeeded")
    s.add(null)
    s.flush()
    for pid in pids:
        row = NullDistribution(
            audit_id=null.id,
            model=audit.model,
            property_id=pid,
            key=Calibrator(s).key(audit, pid),
            config={"lookalikes": "reversed"},
            method="full",
            fingerprint=FINGERPRINT,
            people=100,
            n_facts=100,
        )
        s.add(row)
        s.flush()
        s.add_all(
            NullFact(
                distribution_id=row.id,
                person=i,
                name=f"Person {i}",
                value="v",
                assigned=True,
                share=0.0,
                strict=False,
                lenient=False,
                z_star=None,
                n_templates=2,
                n_z=0,
                statistic=-0.5 + i / 1000,
                misattribution=(0.5 if i == 0 else -1.0) if with_statistic else None,
            )
            for i in range(100)
        )


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
