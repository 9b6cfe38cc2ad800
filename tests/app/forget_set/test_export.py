"""Forget-set export: policies, filters and the jsonl / csv / tofu formats over stored audit results."""

from __future__ import annotations

import csv
import io
import json
import uuid

import pytest


def create_result(s, audit, subject, pid: str, values: list[str], ranking: list[str], *, share: float,
                  strict: bool, z: float, merged: str | None = None):  # fmt: skip
    """A FactResult whose baseline canary ranks ``ranking`` (true values and counterfactuals) in that order."""
    from app.db.models import Canary, CandidateScore, Fact, FactResult
    from core.catalog import load_catalog

    facts = [Fact(property_id=pid, value=v, source="request") for v in values]
    subject.facts.extend(facts)
    s.flush()
    prop = load_catalog().get(pid)
    canary = Canary(template_index=0, template=prop.baseline, kind="baseline", generic_subject="This person",
                    similar_names=["X", "Y"], rank=1 if share > 0 else 2, lead_margin=1.0, z_star=z,
                    memorized=share > 0)  # fmt: skip
    canary.candidates = [
        CandidateScore(value=v, is_ground_truth=v in values or v == merged, nll_subject=1.0, nll_generic=1.0,
                       nll_similar=[1.0], score=-float(r), rank=r + 1)  # fmt: skip
        for r, v in enumerate(ranking)
    ]
    result = FactResult(audit_id=audit.id, property_id=pid, fact_ids=[f.id for f in facts], share=share,
                        strict=strict, lenient=share > 0, z_star=z, n_templates=2)  # fmt: skip
    result.canaries = [canary]
    s.add(result)


@pytest.fixture(params=["sqlite_env", "pg_env"])
def exported_audit(request, api_factory):
    """An auditor's succeeded audit: occupation memorized strictly, citizenship leniently, language not at all
    (on the embedded SQLite default and on Postgres, where the export streams with a server-side cursor)."""
    request.getfixturevalue(request.param)
    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.db.models import Audit, Subject
    from app.settings import get_settings
    from app.subjects.repository import ensure_properties

    api = api_factory("auditor")
    with session_scope() as s:
        key_id = authenticate(s, get_settings(), api.headers["Authorization"].split()[1]).key_id
        ensure_properties(s, {"P106", "P27", "P1412"})
        subject = Subject(name="Ada Lovelace", wikidata_id="Q7259", owner_key_id=key_id)
        s.add(subject)
        s.flush()
        audit = Audit(id=uuid.uuid4().hex, kind="subject", model="groundtruth-tiny", options={},
                      status="succeeded", owner_key_id=key_id, subject_id=subject.id)  # fmt: skip
        s.add(audit)
        s.flush()
        ranking = ["mathematician", "writer", "computer scientist", "poet", "physicist", "chemist", "actor"]
        create_result(s, audit, subject, "P106", ["mathematician"], ranking, share=1.0, strict=True, z=2.5,
                      merged="computer scientist")  # fmt: skip
        create_result(s, audit, subject, "P27", ["United Kingdom"], ["United Kingdom", "France", "Ireland"],
                      share=0.25, strict=False, z=0.4)  # fmt: skip
        create_result(s, audit, subject, "P1412", ["English"], ["French", "English"], share=0.0, strict=False, z=-1)
        audit_id = audit.id
    return api, audit_id


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
    assert {r["property"] for r in rows()} == {"P106", "P27"}, "lenient (default): retrieved by some template"
    assert {r["property"] for r in rows(policy="strict")} == {"P106"}, "strict: by every template"
    assert {r["property"] for r in rows(policy="share", min_share=0.2)} == {"P106", "P27"}
    assert {r["property"] for r in rows(policy="share", min_share=0.5)} == {"P106"}
    assert {r["property"] for r in rows(min_z=1.0)} == {"P106"}
    assert {r["property"] for r in rows(property="P27")} == {"P27"}
    first = rows(property="P106")[0]
    assert first["subject"] == "Ada Lovelace" and first["wikidata_id"] == "Q7259" and first["value"] == "mathematician"
    assert first["canaries"] == ["Ada Lovelace's occupation is {value}."] and first["audit_id"] == aid
    assert first["model"] == "groundtruth-tiny" and first["share"] == 1.0 and first["z_star"] == 2.5


def test_jsonl_ends_with_a_record_count_even_when_empty(exported_audit):
    api, aid = exported_audit
    assert len(jsonl_records(export(api, aid).text)) == 2
    assert export(api, aid, property="P1412").text == '{"_end": {"records": 0}}\n'


def test_share_policy_needs_a_minimum(exported_audit):
    api, aid = exported_audit
    r = api.get("/forget-set", params={"audit_id": aid, "policy": "share"})
    assert r.status_code == 422 and "min_share" in r.text


def test_csv_has_a_header_and_one_row_per_fact(exported_audit):
    api, aid = exported_audit
    table = list(csv.DictReader(io.StringIO(export(api, aid, format="csv").text)))
    assert [row["property"] for row in table] == ["P106", "P27"]
    assert table[0]["canaries"] == "Ada Lovelace's occupation is {value}."


def test_tofu_export_loads_with_datasets_and_has_the_four_fields(exported_audit, tmp_path):
    import datasets

    api, aid = exported_audit
    r = export(api, aid, format="tofu")
    assert "tofu" in r.headers["content-disposition"]
    path = tmp_path / "forget.json"
    path.write_text(r.text)
    ds = datasets.load_dataset("json", data_files=str(path), split="train")
    assert set(ds.column_names) == {"question", "answer", "paraphrased_answer", "perturbed_answer"}
    occupation = ds[0]
    assert occupation["question"] == "What is Ada Lovelace's occupation?"
    assert occupation["answer"] == "Ada Lovelace's occupation is mathematician."
    assert occupation["paraphrased_answer"] == "The occupation of Ada Lovelace is mathematician."
    # the model's top-ranked wrong values, best first; the near-duplicate of the truth is not "wrong"
    assert occupation["perturbed_answer"] == [f"Ada Lovelace's occupation is {v}." for v in
                                              ("writer", "poet", "physicist", "chemist", "actor")]  # fmt: skip
    assert ds[1]["perturbed_answer"] == ["Ada Lovelace's country of citizenship is France.",
                                         "Ada Lovelace's country of citizenship is Ireland."]  # fmt: skip


def test_regulators_cannot_export(exported_audit, api_factory):
    _, aid = exported_audit
    assert api_factory("regulator").get("/forget-set", params={"audit_id": aid, "format": "tofu"}).status_code == 403
