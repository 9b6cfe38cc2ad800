"""Forget-set export: policies, filters and the jsonl / csv / tofu formats over stored audit results."""

from __future__ import annotations

import csv
import io
import json
import uuid

import pytest

from tests.support.misattributed import finished_null
from tests.support.stored import stored_subject_audit


def create_result(
    s,
    audit,
    subject,
    pid: str,
    values: list[str],
    ranking: list[str],
    *,
    share: float,
    strict: bool,
    z: float,
    merged: str | None = None,
):
    """A FactResult whose baseline canary ranks ``ranking`` (true values and counterfactuals) in that order."""
    from app.db.models import Canary, CandidateScore, Fact, FactResult
    from core.catalog import load_catalog

    facts = [Fact(property_id=pid, value=v, source="request") for v in values]
    subject.facts.extend(facts)
    s.flush()
    prop = load_catalog().get(pid)
    canary = Canary(
        template_index=0,
        template=prop.baseline,
        kind="baseline",
        generic_subject="This person",
        similar_names=["X", "Y"],
        rank=1 if share > 0 else 2,
        lead_margin=1.0,
        z_star=z,
        memorized=share > 0,
    )
    canary.candidates = [
        CandidateScore(
            value=v,
            is_ground_truth=v in values or v == merged,
            nll_subject=1.0,
            nll_generic=1.0,
            nll_similar=[1.0],
            score=-float(r),
            rank=r + 1,
        )
        for r, v in enumerate(ranking)
    ]
    result = FactResult(
        audit_id=audit.id,
        property_id=pid,
        fact_ids=[f.id for f in facts],
        share=share,
        strict=strict,
        lenient=share > 0,
        z_star=z,
        n_templates=2,
    )
    result.canaries = [canary]
    s.add(result)
    return result


@pytest.fixture(params=["sqlite_env", "pg_env"])
def exported_audit(request, api_factory):
    """An auditor's succeeded audit: occupation memorized strictly, citizenship leniently, language not at all
    (on the embedded SQLite default and on Postgres, where the export streams with a server-side cursor)."""
    request.getfixturevalue(request.param)
    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.settings import get_settings

    api = api_factory("auditor")
    with session_scope() as s:
        key_id = authenticate(s, get_settings(), api.headers["Authorization"].split()[1]).key_id
        subject, audit = stored_subject_audit(
            s,
            key_id,
            "Ada Lovelace",
            {"P106", "P27", "P1412"},
            wikidata_id="Q7259",
            summary={"scoring": {"fingerprint": FINGERPRINT}, "lookalikes": "reversed"},
        )
        s.flush()
        ranking = ["mathematician", "writer", "computer scientist", "poet", "physicist", "chemist", "actor"]
        create_result(
            s,
            audit,
            subject,
            "P106",
            ["mathematician"],
            ranking,
            share=1.0,
            strict=True,
            z=2.5,
            merged="computer scientist",
        )
        create_result(
            s,
            audit,
            subject,
            "P27",
            ["United Kingdom"],
            ["United Kingdom", "France", "Ireland"],
            share=0.25,
            strict=False,
            z=0.4,
        )
        create_result(s, audit, subject, "P1412", ["English"], ["French", "English"], share=0.0, strict=False, z=-1)
        create_null(s, audit, ["P106", "P27", "P1412"])
        audit_id = audit.id
    return api, audit_id


FINGERPRINT = "f" * 64


def create_null(s, audit, pids: list[str]) -> None:
    """A finished null for the audit's configuration on the same model fingerprint: per property, 99 null facts
    no template retrieves and one retrieved by half the templates with z̄* 1.0."""

    def fields(i: int) -> dict:
        first = i == 0
        return {"share": 0.5 if first else 0.0, "strict": False, "lenient": first, "z_star": 1.0 if first else None}

    finished_null(s, audit, pids, FINGERPRINT, lambda i: fields(i) | {"n_z": int(i == 0), "n_templates": 2})


def export(api, audit_id: str, **params):
    r = api.get("/forget-set", params={"audit_id": audit_id, **params})
    assert r.status_code == 200, r.text
    return r


def jsonl_records(text: str) -> list[dict]:
    """The records of a jsonl forget set, after checking its end marker (the last line) counts them."""
    *rows, end = [json.loads(x) for x in text.splitlines()]
    assert end == {"_end": {"records": len(rows)}}, end
    return rows


def test_policies_select_the_memorized_facts(exported_audit):
    api, aid = exported_audit
    rows = lambda **p: jsonl_records(export(api, aid, **p).text)  # noqa: E731
    assert {r["property"] for r in rows(policy="lenient")} == {"P106", "P27"}, "lenient: retrieved by some template"
    assert {r["property"] for r in rows(policy="strict")} == {"P106"}, "strict: by every template"
    assert {r["property"] for r in rows(policy="share", min_share=0.2)} == {"P106", "P27"}
    assert {r["property"] for r in rows(policy="share", min_share=0.5)} == {"P106"}
    assert {r["property"] for r in rows(policy="lenient", min_z=1.0)} == {"P106"}
    assert {r["property"] for r in rows(policy="lenient", property="P27")} == {"P27"}
    first = rows(property="P106")[0]
    assert first["subject"] == "Ada Lovelace" and first["wikidata_id"] == "Q7259" and first["value"] == "mathematician"
    assert first["canaries"] == ["Ada Lovelace's occupation is {value}."] and first["audit_id"] == aid
    assert first["model"] == "groundtruth-tiny" and first["share"] == 1.0 and first["z_star"] == 2.5


def test_jsonl_ends_with_a_record_count_even_when_empty(exported_audit):
    api, aid = exported_audit
    assert len(jsonl_records(export(api, aid, policy="lenient").text)) == 2
    assert export(api, aid, property="P1412").text == '{"_end": {"records": 0}}\n'


def test_share_policy_needs_a_minimum(exported_audit):
    api, aid = exported_audit
    r = api.get("/forget-set", params={"audit_id": aid, "policy": "share"})
    assert r.status_code == 422 and "min_share" in r.text


def test_csv_has_a_header_and_one_row_per_fact(exported_audit):
    api, aid = exported_audit
    table = list(csv.DictReader(io.StringIO(export(api, aid, format="csv", policy="lenient").text)))
    assert [row["property"] for row in table] == ["P106", "P27"]
    assert table[0]["canaries"] == "Ada Lovelace's occupation is {value}."


def test_tofu_export_loads_with_datasets_and_has_the_four_fields(exported_audit, tmp_path):
    import datasets

    api, aid = exported_audit
    r = export(api, aid, format="tofu", policy="lenient")
    assert "tofu" in r.headers["content-disposition"]
    path = tmp_path / "forget.json"
    path.write_text(r.text)
    ds = datasets.load_dataset("json", data_files=str(path), split="train")
    assert {"question", "answer", "paraphrased_answer", "perturbed_answer"} <= set(ds.column_names)
    assert ds[0]["policy"] == "lenient" and ds[0]["p_value"] == pytest.approx(1 / 101)
    occupation = ds[0]
    assert occupation["question"] == "What is Ada Lovelace's occupation?"
    assert occupation["answer"] == "Ada Lovelace's occupation is mathematician."
    assert occupation["paraphrased_answer"] == "The occupation of Ada Lovelace is mathematician."
    # the model's top-ranked wrong values, best first; the near-duplicate of the truth is not "wrong"
    assert occupation["perturbed_answer"] == [
        f"Ada Lovelace's occupation is {v}." for v in ("writer", "poet", "physicist", "chemist", "actor")
    ]
    assert ds[1]["perturbed_answer"] == [
        "Ada Lovelace's country of citizenship is France.",
        "Ada Lovelace's country of citizenship is Ireland.",
    ]


def test_regulators_cannot_export(exported_audit, api_factory):
    _, aid = exported_audit
    assert api_factory("regulator").get("/forget-set", params={"audit_id": aid, "format": "tofu"}).status_code == 403


def test_default_policy_selects_by_p_value_against_the_matching_null(exported_audit):
    api, aid = exported_audit
    rows = lambda **p: jsonl_records(export(api, aid, **p).text)  # noqa: E731
    # occupation (share 1.0): no null fact is as extreme -> p = 1/101 <= 0.01; citizenship (share 0.25): the one
    # null fact at share 0.5 is -> p = 2/101 = 0.0198 > 0.01; language: share 0 -> p = 1
    default = rows()
    assert {r["property"] for r in default} == {"P106"}
    occupation = default[0]
    assert occupation["policy"] == "pvalue<=0.01" and occupation["p_value"] == pytest.approx(1 / 101)
    # the policy's FPR on the null: each null fact against the 99 others; only the share-0.5 one has p = 1/100
    assert occupation["policy_fpr"]["k"] == 1 and occupation["policy_fpr"]["n"] == 100
    assert occupation["null"]["status"] == "ready" and occupation["null"]["people"] == 100
    assert {r["property"] for r in rows(max_p=0.05)} == {"P106", "P27"}
    # BH at q = 0.05 over the m = 3 facts: bounds 0.0167, 0.0333, 0.05 -> p 0.0099 and 0.0198 pass, p = 1 not
    bh = rows(policy="bh", q=0.05)
    assert {r["property"] for r in bh} == {"P106", "P27"} and bh[0]["policy"].startswith("bh(q=0.05)")
    assert rows(policy="bh", q=0.02) == []  # bounds 0.0067, 0.0133, 0.02: none passes
    table = list(csv.DictReader(io.StringIO(export(api, aid, format="csv").text)))
    assert [row["property"] for row in table] == ["P106"] and float(table[0]["p_value"]) == pytest.approx(1 / 101)
    assert table[0]["null_status"] == "ready" and table[0]["policy"] == "pvalue<=0.01"


def test_facts_without_a_null_are_left_out_said_in_the_end_marker_and_nothing_is_queued(pg_env, api_factory):
    """No null for the configuration: the p-value policy selects nothing and its end marker says so (never a
    silent 0); records under lenient say "missing" and how to create the null; the read queues nothing."""
    from app.db.engine import session_scope
    from app.db.models import Audit, Subject
    from app.nulls.calibrate import MISSING
    from app.wikidata.repository import ensure_properties

    with session_scope() as s:
        ensure_properties(s, {"P27"})
        subject = Subject(name="Ada Lovelace")
        s.add(subject)
        s.flush()
        audit = Audit(
            id=uuid.uuid4().hex,
            kind="subject",
            model="groundtruth-tiny",
            options={"paraphrases": 1},
            status="succeeded",
            subject_id=subject.id,
            summary={"scoring": {"fingerprint": "e" * 64}},
        )
        s.add(audit)
        s.flush()
        create_result(
            s, audit, subject, "P27", ["United Kingdom"], ["United Kingdom", "France"], share=1.0, strict=True, z=2.0
        )
        aid = audit.id
    api = admin = api_factory("admin")
    before = admin.get("/audits", params={"kind": "null", "page_size": 200}).json()["total"]
    end = json.loads(export(api, aid).text.splitlines()[-1])["_end"]
    assert end["records"] == 0 and end["pending"] == 1 and end["pending_by_status"] == {"missing": 1}, end
    assert end["pending_nulls"][0]["message"] == MISSING
    lenient = jsonl_records(export(api, aid, policy="lenient").text)
    assert lenient[0]["null"]["status"] == "missing" and lenient[0]["p_value"] is None
    assert lenient[0]["null"]["message"] == MISSING
    assert admin.get("/audits", params={"kind": "null", "page_size": 200}).json()["total"] == before, "a read queued"


def test_a_subject_audited_twice_is_exported_once_unless_all_audits_are_asked_for(pg_env, api_factory):
    from datetime import timedelta

    from app.db.base import utcnow
    from app.db.engine import session_scope
    from app.db.models import Audit, Subject
    from app.wikidata.repository import ensure_properties

    ids = []
    with session_scope() as s:
        ensure_properties(s, {"P27"})
        subject = Subject(name="Grace Hopper")
        s.add(subject)
        s.flush()
        for age in (2, 1):  # the older run first, as `make demo` twice
            audit = Audit(
                id=uuid.uuid4().hex,
                kind="subject",
                model="groundtruth-tiny",
                options={"paraphrases": 1},
                status="succeeded",
                subject_id=subject.id,
                finished_at=utcnow() - timedelta(hours=age),
                summary={"scoring": {"fingerprint": "e" * 64}},
            )
            s.add(audit)
            s.flush()
            create_result(
                s, audit, subject, "P27", ["United States"], ["United States", "France"], share=1.0, strict=True, z=2.0
            )
            ids.append(audit.id)
        subject_id = subject.id
    api = api_factory("admin")

    def audits_of(**params) -> list[str]:
        r = api.get("/forget-set", params={"subject_id": subject_id, "policy": "lenient", **params})
        assert r.status_code == 200, r.text
        return [row["audit_id"] for row in jsonl_records(r.text)]

    # (create_result stores the subject's fact once per run: the newest audit's fact is exported, once)
    assert set(audits_of()) == {ids[1]}, "the older run's facts are in the forget set too"
    assert set(audits_of(audits="all")) == set(ids)


def test_every_memorized_fact_is_exported_by_the_p_value_policies_even_one_no_template_ranks_first(
    sqlite_env, api_factory
):
    """The verdict statistic uses every rank: a truth second under every template, far above its counterfactuals'
    mean, is flagged (p <= 0.01) though no template ranks it first. Every fact whose verdict says `memorized: true`
    is in the `pvalue` forget set (and under `bh`, which selects it too); the lenient reading still leaves it out.
    (Before, both p-value policies kept only facts some template ranks first: this one was silently dropped.)"""
    import random

    from sqlalchemy import select

    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.db.models import NullFact
    from app.settings import get_settings

    api = api_factory("auditor")
    with session_scope() as s:
        key_id = authenticate(s, get_settings(), api.headers["Authorization"].split()[1]).key_id
        summary = {"scoring": {"fingerprint": FINGERPRINT}, "lookalikes": "reversed"}
        subject, audit = stored_subject_audit(s, key_id, "Ada Lovelace", {"P21", "P27"}, summary=summary)
        s.flush()
        second = create_result(s, audit, subject, "P21", ["female"], ["male", "female"], share=0.0, strict=False, z=0)
        first = create_result(
            s, audit, subject, "P27", ["United Kingdom"], ["United Kingdom", "France"], share=1.0, strict=True, z=2.0
        )
        for result, statistic in ((second, 6.0), (first, 5.0)):
            result.statistic, result.n_values, result.in_pool = statistic, 1, True
        create_null(s, audit, ["P21", "P27"])
        s.flush()
        rng = random.Random(3)
        for fact in s.scalars(select(NullFact)):  # knowledge-free null statistics: none near 5
            fact.statistic, fact.n_values, fact.in_pool = rng.gauss(0.0, 1.0), 1, True
        aid = audit.id
    facts = {f["property"]: f for f in api.get(f"/audits/{aid}/facts").json()["facts"]}
    assert facts["P21"]["lenient"] is False and facts["P21"]["calibration"]["memorized"] is True, facts["P21"]
    flagged = {pid for pid, f in facts.items() if f["calibration"]["memorized"]}
    assert flagged == {"P21", "P27"}
    for params in ({}, {"policy": "bh", "q": 0.05}):
        assert {r["property"] for r in jsonl_records(export(api, aid, **params).text)} == flagged, params
    exported = jsonl_records(export(api, aid).text)
    gender = next(r for r in exported if r["property"] == "P21")
    assert gender["value"] == "female" and gender["canaries"] == [] and gender["p_value"] <= 0.01
    assert {r["property"] for r in jsonl_records(export(api, aid, policy="lenient").text)} == {"P27"}
