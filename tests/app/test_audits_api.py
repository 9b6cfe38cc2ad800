"""The audits API on real Postgres: auth, validation, idempotency, visibility, paging, cancellation."""

from __future__ import annotations

import pytest

FACTS = [{"property": "P106", "value": "physicist"}, {"property": "P27", "value": "Germany"}]


def body(name: str = "Test Person", facts=None, model: str = "groundtruth-tiny", **options) -> dict:
    return {
        "kind": "subject",
        "model": model,
        "subject": {"name": name, "facts": FACTS if facts is None else facts},
        "options": options,
    }


@pytest.fixture
def auditor(pg_env, api_factory):
    return api_factory("auditor")


def fields(response) -> list[str]:
    return [d["field"] for d in response.json()["detail"]]


def test_missing_and_wrong_keys_are_rejected(pg_env, api_factory):
    assert api_factory().post("/audits", json=body()).status_code == 401
    wrong = api_factory(key="mak_deadbeef0000_notasecret")
    r = wrong.get("/audits")
    assert r.status_code == 401 and "invalid" in r.json()["detail"][0]["message"]
    assert api_factory(key="garbage").get("/audits").status_code == 401


def test_roles_that_may_not_submit(pg_env, api_factory):
    for role in ("regulator", "pipeline"):
        r = api_factory(role).post("/audits", json=body())
        assert r.status_code == 403, (role, r.text)
        assert "you are " + role in r.json()["detail"][0]["message"]
    assert api_factory("regulator").post("/audits", json={"kind": "subject"}).status_code == 403, "role before body"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (body(facts=[{"property": "P999999", "value": "x"}]), "subject.facts[0].property"),
        (body(name=""), "subject.name"),
        (body(name="   "), "subject.name"),
        (body(name="x" * 201), "subject.name"),
        (body(facts=[{"property": "P106", "value": "physicist"}] * 51), "subject.facts"),
        (body(model="no-such-model"), "model"),
        (body(model="hf: "), "model"),  # the job would reject it by name: so does the API
        (body(model="hf:"), "model"),
        (body(facts=[]), "subject.facts"),
        ({"kind": "subject", "model": "groundtruth-tiny"}, "subject"),
        ({**body(), "unexpected": 1}, "body"),  # the unknown name is not repeated: its parent is named
        (body(counterfactuals=0), "options.counterfactuals"),
    ],
)
def test_bad_input_names_the_field(auditor, payload, field):
    r = auditor.post("/audits", json=payload)
    assert r.status_code == 422, r.text
    assert any(f.endswith(field) for f in fields(r)), (field, r.json())


def test_bad_input_never_echoes_personal_data(auditor):
    r = auditor.post("/audits", json=body(name="Secret Person " + "y" * 300))
    assert r.status_code == 422
    assert "Secret Person" not in r.text


def test_malformed_json_is_a_422(auditor):
    r = auditor.post("/audits", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and fields(r) == ["body"] and "not valid JSON" in r.text, r.text


@pytest.mark.parametrize("body", ["[" * 100_000 + "]" * 100_000, '{"kind": "subject", "options": ' + '{"a": ' * 5000])
def test_a_body_nested_past_the_parser_names_the_body_and_the_fix(auditor, body):
    """FastAPI answers 400 "There was an error parsing the body" (field null) when json's recursion limit is hit."""
    r = auditor.post("/audits", content=body.encode(), headers={"Content-Type": "application/json"})
    assert r.status_code in (400, 422) and fields(r) == ["body"], r.text
    assert "JSON object" in r.json()["detail"][0]["message"]


def test_bad_page_size(auditor, pg_env):
    assert fields(auditor.get("/audits", params={"page_size": 0})) == ["page_size"]
    assert fields(auditor.get("/audits", params={"page_size": 10_000})) == ["page_size"]
    assert fields(auditor.get("/audits", params={"page": 0})) == ["page"]


def test_idempotency_key_replays_and_conflicts(auditor, pg_env):
    from sqlalchemy import func, select

    from app.db.engine import session_scope
    from app.db.models import Audit

    headers = {"Idempotency-Key": "key-123"}
    subject_audits = select(func.count()).select_from(Audit).where(Audit.kind == "subject")  # (a null may come too)
    with session_scope() as s:
        before = s.scalar(subject_audits)
    first = auditor.post("/audits", json=body(), headers=headers)
    second = auditor.post("/audits", json=body(), headers=headers)
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    assert second.headers.get("Idempotent-Replayed") == "true"
    with session_scope() as s:
        assert s.scalar(subject_audits) == before + 1
    changed = auditor.post("/audits", json=body(name="Someone Else"), headers=headers)
    assert changed.status_code == 409 and fields(changed) == ["Idempotency-Key"]


def test_other_principals_get_404(pg_env, api_factory):
    alice, bob = api_factory("auditor"), api_factory("auditor")
    created = alice.post("/audits", json=body()).json()
    aid = created["id"]
    assert alice.get(f"/audits/{aid}").status_code == 200
    assert bob.get(f"/audits/{aid}").status_code == 404
    assert bob.get(f"/audits/{aid}/facts").status_code == 404
    assert bob.delete(f"/audits/{aid}").status_code == 404
    assert aid not in [a["id"] for a in bob.get("/audits").json()["items"]]
    assert api_factory("regulator").get(f"/audits/{aid}").status_code == 200
    assert api_factory("pipeline").get(f"/audits/{aid}").status_code == 404
    # the data subject's token reads this audit and nothing else
    subject = api_factory(key=created["subject_token"])
    assert subject.get(f"/audits/{aid}").status_code == 200
    other = alice.post("/audits", json=body(name="Other Person")).json()["id"]
    assert subject.get(f"/audits/{other}").status_code == 404
    assert subject.post("/audits", json=body()).status_code == 403
    forged = created["subject_token"][:-4] + "0000"
    assert api_factory(key=forged).get(f"/audits/{aid}").status_code == 401


def test_list_filters_and_paging(pg_env, api_factory):
    api = api_factory("auditor")
    ids = [api.post("/audits", json=body(name=f"Person {i}")).json()["id"] for i in range(3)]
    page1 = api.get("/audits", params={"page_size": 2}).json()
    page2 = api.get("/audits", params={"page_size": 2, "page": 2}).json()
    assert page1["total"] == 3 and len(page1["items"]) == 2 and len(page2["items"]) == 1
    assert {a["id"] for a in page1["items"] + page2["items"]} == set(ids)
    assert api.get("/audits", params={"kind": "coverage"}).json()["total"] == 0
    assert fields(api.get("/audits", params={"kind": "no-such-kind"})) == ["kind"], "kinds come from the registry"
    assert api.get("/audits", params={"status": "queued", "model": "groundtruth-tiny"}).json()["total"] == 3


def test_cancel_a_queued_audit(pg_env, api_factory):
    api = api_factory("auditor")
    aid = api.post("/audits", json=body()).json()["id"]
    r = api.delete(f"/audits/{aid}")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    again = api.delete(f"/audits/{aid}")
    assert again.status_code == 409


def test_every_error_answers_one_shape(pg_env, api_factory):
    """{"detail": [{"field": ..., "message": ...}]} for every 4xx: field null when no request field is at fault."""
    auditor = api_factory("auditor")
    aid = auditor.post("/audits", json=body()).json()["id"]
    auditor.delete(f"/audits/{aid}")
    answers = {
        401: api_factory().get("/audits"),
        403: api_factory("regulator").post("/audits", json=body()),
        404: auditor.get("/audits/no-such-audit"),
        409: auditor.delete(f"/audits/{aid}"),
        422: auditor.post("/audits", json=body(model="hf: ")),
    }
    unknown_route, wrong_method = auditor.get("/no/such/route"), auditor.put("/audits")
    for status, r in [*answers.items(), (404, unknown_route), (405, wrong_method)]:
        assert r.status_code == status, (status, r.text)
        [item] = r.json()["detail"]
        assert set(item) == {"field", "message"} and item["message"], (status, item)
    assert answers[422].json()["detail"][0]["field"] == "model"
    assert answers[401].json()["detail"][0]["field"] is None and answers[401].headers["WWW-Authenticate"] == "Bearer"


def test_models_properties_health(pg_env, api_factory):
    api = api_factory("auditor")
    names = [m["name"] for m in api.get("/models").json()]
    assert {"smollm2-135m", "groundtruth-tiny"} <= set(names)
    props = {p["pid"] for p in api.get("/properties").json()}
    assert {"P106", "P27", "P19", "P21", "P1412"} <= props
    assert api_factory().get("/health").json()["status"] == "ok"


def test_forget_set_roles(pg_env, api_factory):
    assert api_factory("regulator").get("/forget-set").status_code == 403
    r = api_factory("pipeline").get("/forget-set", params={"format": "csv"})
    assert r.status_code == 200 and r.text.startswith("subject_id,")
    assert api_factory("pipeline").get("/forget-set", params={"policy": "share"}).status_code == 422


def test_a_chat_endpoint_model_needs_generation_mode(pg_env, api_factory, monkeypatch):
    """A chat endpoint gives no prompt log-probs: a scoring audit of it is a 422 naming options.mode and the fix."""
    import json

    from app.settings import get_settings

    chat = {"backend": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "served_model": "assistant"}
    monkeypatch.setenv("MEMAUDIT_MODELS", json.dumps({"groundtruth-tiny": {"path": "/nowhere"}, "assistant": chat}))
    get_settings.cache_clear()
    auditor = api_factory("auditor")
    r = auditor.post("/audits", json=body(model="assistant"))
    assert r.status_code == 422 and fields(r) == ["options.mode"], r.text
    message = r.json()["detail"][0]["message"]
    assert 'options.mode "generation"' in message and "without prompt log-probabilities" in message
    coverage = {
        "kind": "coverage",
        "model": "assistant",
        "dataset_id": "no-such-dataset",
        "target": "items",
        "options": {},
    }
    r = auditor.post("/audits", json=coverage)
    assert r.status_code == 422 and fields(r) == ["options.mode"], r.text
    batch = {"models": ["groundtruth-tiny", "assistant"], "people": [{"name": "Batch Person", "P27": ["Germany"]}]}
    r = auditor.post("/batches", json=batch)
    assert r.status_code == 422 and fields(r) == ["options.mode"], r.text
    assert auditor.post("/audits", json=body(model="groundtruth-tiny")).status_code == 202  # other models: as before
