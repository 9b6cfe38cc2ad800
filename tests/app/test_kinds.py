"""Audit kinds describe themselves: a new kind (tests/support/toy_kind.py) runs end to end over the API, on the
embedded path, registered in a test with no edit of app/audits; every kind answers a wrong kind with one 404."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.kinds import KINDS
from app.main import create_app
from tests.conftest import Api, make_key, wait_for
from tests.support.toy_kind import KIND as TOY


def api_with(kinds, role: str = "auditor") -> Api:
    api = Api(make_key(role))
    api.client = TestClient(create_app(kinds))
    return api


def fields(response) -> list[str]:
    return [d["field"] for d in response.json()["detail"]]


def test_a_kind_registered_in_a_test_runs_through_the_api(sqlite_env):
    api = api_with(KINDS.with_kind(TOY))
    r = api.post("/audits", json={"kind": "toy", "texts": ["one two three", "four five"], "options": {"repeat": 2}})
    assert r.status_code == 202, r.text
    created = r.json()
    assert created["links"] == {"self": f"/audits/{created['id']}", "words": f"/audits/{created['id']}/words"}
    assert created["subject_token"] is None and created["options"] == {
        "repeat": 2,
        "texts": ["one two three", "four five"],
    }
    done = wait_for(api, created["id"], timeout=60)
    assert done["status"] == "succeeded", done
    assert done["summary"] == {"words": 10} and done["progress"] == {"done": 2, "total": 2}
    page = api.get(done["links"]["words"])
    assert page.status_code == 200 and page.json()["words"] == 10
    assert created["id"] in [a["id"] for a in api.get("/audits", params={"kind": "toy"}).json()["items"]]
    # its own validation answers like every kind's: a 422 naming the field
    bad = api.post("/audits", json={"kind": "toy", "texts": ["fine", "   "]})
    assert bad.status_code == 422 and fields(bad) == ["texts[1]"]
    assert fields(api.post("/audits", json={"kind": "toy", "texts": ["a"], "options": {"repeat": 9}})) == [
        "options.repeat"
    ]
    # another kind's result page for it is a 404 (field null), and its own page for another kind too
    wrong = api.get(f"/audits/{created['id']}/facts")
    assert wrong.status_code == 404 and fields(wrong) == [None] and "toy audit" in wrong.json()["detail"][0]["message"]


def test_the_service_without_the_kind_refuses_it(sqlite_env):
    api = api_with(KINDS)
    r = api.post("/audits", json={"kind": "toy", "texts": ["one"]})
    assert r.status_code == 422
    assert fields(api.get("/audits", params={"kind": "toy"})) == ["kind"]


def test_a_wrong_kind_is_the_same_404_on_every_kind(sqlite_env):
    api = api_with(KINDS.with_kind(TOY))
    toy = api.post("/audits", json={"kind": "toy", "texts": ["one"]}).json()["id"]
    pages = ["facts", "records", "capacity", "capacity/series", "capacity/texts", "strings", "series"]
    for page in pages:
        r = api.get(f"/audits/{toy}/{page}")
        assert r.status_code == 404, (page, r.text)
        assert fields(r) == [None] and "this audit is a toy audit" in r.json()["detail"][0]["message"], page
