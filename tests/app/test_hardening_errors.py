"""Rejected values are never repeated in an answer (ids, model names, property ids, field names, keys), and hf:
models are accepted only where the settings allow, with one message whether a path exists or not."""

from __future__ import annotations

import json

import pytest

MARK = "Zzecho7431"
LONG_ID = MARK + "x" * 10_000
SUBJECT = {
    "kind": "subject",
    "model": "groundtruth-tiny",
    "subject": {"name": "Echo Person", "facts": [{"property": "P106", "value": "physicist"}]},
}


def subject(**changes) -> dict:
    return {**SUBJECT, **changes}


BAD_BODIES = [
    subject(model=MARK),
    subject(model=f"hf:/{MARK}/model"),
    subject(kind=MARK),
    subject(subject={"name": "Echo Person", "facts": [{"property": MARK, "value": "physicist"}]}),
    subject(subject={"name": "Echo Person", "facts": [{"property": "P106", "value": "physicist", MARK: 1}]}),
    subject(subject={"wikidata_id": MARK}),
    subject(options={MARK: 1}),
    subject(options={"counterfactuals": MARK}),
    {**SUBJECT, MARK: True},
    {"kind": "coverage", "model": "groundtruth-tiny", "dataset_id": MARK[:32], "target": "items"},
    {"kind": "capacity", "model": "groundtruth-tiny", "mode": "text", "text": {"texts": ["a b c"], "reference": MARK}},
]
BAD_READS = [
    f"/audits/{LONG_ID}",
    f"/audits/{MARK}/facts",
    f"/audits/{MARK}/records",
    f"/audits/{MARK}/capacity",
    f"/audits/{MARK}/capacity/texts",
    f"/audits/{MARK}/strings",
    f"/audits/{MARK}/series",
    f"/datasets/{MARK}",
    f"/datasets/{MARK}/coverage",
    f"/audits?kind={MARK}",
    f"/audits?status={MARK}",
    f"/audits?page={MARK}",
    f"/forget-set?format={MARK}",
    f"/forget-set?policy={MARK}",
    f"/forget-set?min_z={MARK}",
]


@pytest.fixture
def roots_env(pg_env, monkeypatch, tmp_path):
    """hf: paths allowed under tmp_path only."""
    from app.settings import get_settings

    monkeypatch.setenv("MEMAUDIT_MODEL_ROOTS", json.dumps([str(tmp_path)]))
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def test_no_error_answer_repeats_the_rejected_value(roots_env, api_factory):
    api = api_factory("auditor")
    answers = [api.post("/audits", json=b) for b in BAD_BODIES]
    answers += [api.get(url) for url in BAD_READS]
    answers += [api.delete(f"/audits/{LONG_ID}"), api.delete(f"/datasets/{MARK}")]
    answers.append(api.post("/datasets", data={"name": "d", MARK: "1"}, files={"items": ("i.csv", b"item_id\n1\n")}))
    mapping = {"items": {"columns": ["item_id"], "roles": {"item_id": MARK}}}
    answers.append(
        api.post(
            "/datasets", data={"name": "d", "mapping": json.dumps(mapping)}, files={"items": ("i.csv", b"item_id\n1\n")}
        )
    )
    answers.append(api_factory(key=f"mak_{MARK}_secret").get("/audits"))
    api.post("/audits", json=SUBJECT, headers={"Idempotency-Key": MARK})
    answers.append(api.post("/audits", json=subject(model="smollm2-135m"), headers={"Idempotency-Key": MARK}))
    assert all(400 <= r.status_code < 500 for r in answers), [(r.request.url, r.status_code) for r in answers]
    echoed = [(str(r.request.url)[:80], r.text[:200]) for r in answers if MARK.lower() in r.text.lower()]
    assert not echoed, echoed
    assert all(isinstance(r.json()["detail"], list) for r in answers), "one error shape everywhere"


def test_hf_paths_only_under_the_model_roots(roots_env, api_factory):
    api = api_factory("auditor")
    (roots_env / "model").mkdir()
    assert api.post("/audits", json=subject(model=f"hf:{roots_env}/model")).status_code == 202
    refused = [
        subject(model=m)
        for m in (f"hf:{roots_env}/../etc", "hf:/etc", "hf:/etc/passwd", "hf:/no/such/dir", "hf:org/hub-id")
    ]
    answers = [api.post("/audits", json=b) for b in refused]
    assert {r.status_code for r in answers} == {422}
    assert len({r.text for r in answers}) == 1, "one message whether the path exists or not"
    assert "MEMAUDIT_MODEL_ROOTS" in answers[0].text


def test_production_takes_registered_models_only(pg_env, monkeypatch, api_factory):
    from app.settings import get_settings

    monkeypatch.setenv("MEMAUDIT_ENV", "production")
    monkeypatch.setenv("MEMAUDIT_KEY_PEPPER", "a-long-random-production-secret")
    get_settings.cache_clear()
    try:
        api = api_factory("auditor")
        r = api.post("/audits", json=subject(model="hf:/etc"))
        assert r.status_code == 422 and "no model roots" in r.text and "/etc" not in r.text
        assert api.post("/audits", json=SUBJECT).status_code == 202
    finally:
        get_settings.cache_clear()


def test_a_validators_message_reads_without_pydantics_prefix(pg_env, api_factory):
    """A validator's own words reach the client as written: "give the subject's name ...", not "Value error, give
    ..." (app.validation.error_message), in the API's answer and in the command line's."""
    from app.validation import error_message

    api = api_factory("auditor")
    answer = api.post("/audits", json={"kind": "subject", "model": "groundtruth-tiny", "subject": {"facts": []}})
    assert answer.status_code == 422, answer.text
    messages = [e["message"] for e in answer.json()["detail"]]
    assert messages and not [m for m in messages if "Value error" in m], answer.text
    assert any(m.startswith("give the subject's") for m in messages), answer.text
    assert error_message({"msg": "Value error, give x"}) == "give x" and error_message({"msg": "bad"}) == "bad"
