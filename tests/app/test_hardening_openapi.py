"""The OpenAPI document describes the API as it runs: the error shape and statuses, the bearer scheme, limits
from the settings, `model` as the models this server takes, and Allow headers that list every method."""

from __future__ import annotations

import re

import pytest

ERROR_STATUSES = {"400", "401", "403", "404", "409", "413", "422", "429", "503"}


def document(monkeypatch=None, **settings: str) -> dict:
    from app.main import create_app
    from app.settings import get_settings

    for name, value in settings.items():
        monkeypatch.setenv(f"MEMAUDIT_{name.upper()}", value)
    get_settings.cache_clear()
    try:
        return create_app().openapi()
    finally:
        get_settings.cache_clear()


def operations(doc: dict):
    for path, methods in doc["paths"].items():
        for method, operation in methods.items():
            yield path, method, operation


def test_every_operation_documents_the_error_shape_and_statuses():
    doc = document()
    for path, method, operation in operations(doc):
        responses = operation["responses"]
        assert set(responses) >= ERROR_STATUSES, (method, path, sorted(responses))
        for status in ERROR_STATUSES:
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    item = doc["components"]["schemas"]["ErrorItem"]
    assert set(item["properties"]) == {"field", "message"}
    assert doc["paths"]["/audits"]["post"]["responses"]["429"]["headers"]["Retry-After"]


def test_bearer_security_on_every_operation_but_health():
    doc = document()
    assert doc["components"]["securitySchemes"]["HTTPBearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (mak_…) or a data subject's token (mas_…)",
    }
    for path, method, operation in operations(doc):
        expected = [] if path == "/health" else [{"HTTPBearer": []}]
        assert operation.get("security", []) == expected, (method, path)


def test_limits_and_models_follow_the_settings(monkeypatch, tmp_path):
    doc = document(monkeypatch, max_page_size="77", max_facts_per_subject="9")
    page_size = next(p for p in doc["paths"]["/audits"]["get"]["parameters"] if p["name"] == "page_size")
    assert page_size["schema"]["maximum"] == 77
    assert doc["components"]["schemas"]["SubjectIn"]["properties"]["facts"]["maxItems"] == 9
    model = doc["components"]["schemas"]["SubjectAuditCreate"]["properties"]["model"]
    assert model["anyOf"][0]["enum"] == ["groundtruth-tiny", "knowledge-free", "smollm2-135m", "smollm2-taught"]
    assert model["anyOf"][1]["pattern"] == "^hf:.+", "development: any hf: location"
    capacity = doc["components"]["schemas"]["CapacityAuditCreate"]["properties"]["model"]
    assert "scratch" in capacity["anyOf"][0]["enum"]

    rooted = document(monkeypatch, model_roots=f'["{tmp_path}"]')
    pattern = rooted["components"]["schemas"]["SubjectAuditCreate"]["properties"]["model"]["anyOf"][1]["pattern"]
    assert re.search(pattern, f"hf:{tmp_path}/model") and not re.search(pattern, "hf:/etc/model")

    production = document(
        monkeypatch, env="production", key_pepper="a-long-random-production-secret", model_roots="null"
    )
    model = production["components"]["schemas"]["SubjectAuditCreate"]["properties"]["model"]
    assert "anyOf" not in model and model["enum"] == [
        "groundtruth-tiny",
        "knowledge-free",
        "smollm2-135m",
        "smollm2-taught",
    ], "no hf: in production"


def test_integers_are_bounded_in_the_document():
    doc = document()
    subject_id = doc["paths"]["/subjects/{subject_id}"]["delete"]["parameters"][0]["schema"]
    assert (subject_id["minimum"], subject_id["maximum"]) == (1, 2**31 - 1)
    seed = doc["components"]["schemas"]["SubjectAuditOptions"]["properties"]["seed"]
    assert seed["maximum"] == 2**63 - 1


@pytest.fixture
def auditor(pg_env, api_factory):
    return api_factory("auditor")


def test_allow_lists_every_method_of_the_path(auditor):
    options = auditor.options("/audits/0123")
    assert options.status_code == 204 and options.headers["allow"] == "DELETE, GET, HEAD, OPTIONS"
    patched = auditor.patch("/audits/0123", json={})
    assert patched.status_code == 405 and patched.headers["allow"] == "DELETE, GET, HEAD, OPTIONS"
    assert patched.json() == {"detail": [{"field": None, "message": patched.json()["detail"][0]["message"]}]}
    assert auditor.get("/no/such/path").json()["detail"][0]["field"] is None
