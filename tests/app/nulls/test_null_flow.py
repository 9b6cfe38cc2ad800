"""Null calibration through the service on the ground-truth model: a subject audit's facts first say "pending"
and queue a null audit, then carry p-values that can be recomputed from the stored null facts; the null is re-used
by the next audit with the same configuration; cohort statistics match a hand computation from the facts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from app.settings import get_settings
from tests.conftest import wait_for

MANIFEST = Path(__file__).resolve().parents[3] / "workers" / "groundtruth" / "manifest.json"
OPTIONS = {"paraphrases": 2, "counterfactuals": 20}


@pytest.fixture
def small_nulls(sqlite_env, monkeypatch):
    monkeypatch.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", "30")
    monkeypatch.setenv("MEMAUDIT_NULL_MIN_PEOPLE", "3")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def body(person: dict) -> dict:
    facts = [{"property": p, "value": person["facts"][p][0]} for p in ("P106", "P27")]
    return {
        "kind": "subject",
        "model": "groundtruth-tiny",
        "options": OPTIONS,
        "subject": {"name": person["name"], "facts": facts},
    }


def audit(api, person: dict) -> str:
    r = api.post("/audits", json=body(person))
    assert r.status_code == 202, r.text
    assert wait_for(api, r.json()["id"], timeout=600)["status"] == "succeeded"
    return r.json()["id"]


def key(share: float, z: float | None) -> tuple[float, float]:
    return round(share, 9), -math.inf if z is None else z


def by_hand_p(fact: dict, null_facts: list[dict]) -> float:
    """(1 + null facts with a larger share, or the same share and z̄* at least as large) / (1 + N)."""
    observed = key(fact["share"], fact["z"])
    return (1 + sum(key(n["share"], n["z_star"]) >= observed for n in null_facts)) / (1 + len(null_facts))


def rank1_z(fact: dict) -> float | None:
    zs = [
        c["z_star"] for c in fact["canaries"] if c["memorized"] and c["z_star"] is not None and c["kind"] != "context"
    ]
    return sum(zs) / len(zs) if zs else None


def test_facts_are_pending_then_calibrated_and_the_null_is_reused(small_nulls, api_factory):
    people = json.loads(MANIFEST.read_text())
    auditor, admin = api_factory("auditor"), api_factory("admin")
    first = audit(auditor, people["trained"][0])
    page = auditor.get(f"/audits/{first}/facts").json()
    assert {n["status"] for n in page["calibration"]["nulls"]} == {"pending"}, page["calibration"]
    null_id = page["calibration"]["nulls"][0]["null_audit_id"]
    assert null_id and all(f["calibration"]["status"] == "pending" for f in page["facts"])
    assert {f["calibration"]["null_audit_id"] for f in page["facts"]} == {null_id}
    assert auditor.get(f"/audits/{null_id}").status_code == 404  # the service's own audit
    assert wait_for(admin, null_id, timeout=600)["status"] == "succeeded"

    null = admin.get(f"/audits/{null_id}/null", params={"detail": "facts", "limit": 5000}).json()
    dists = {d["property"]: d for d in null["distributions"]}
    # a full null is the people's own values; its other candidates are listed too (what pseudo-truths would say)
    assert len(dists["P27"]["facts"]) == 30 * 21 and "pseudo_truths" in dists["P27"]["summary"]
    dists["P27"]["facts"] = [f for f in dists["P27"]["facts"] if f["assigned"]]
    assert dists["P27"]["method"] == "full" and dists["P27"]["people"] == 30 and dists["P27"]["null_facts"] == 30
    # pseudo-truths: max(3 people, ⌈30 / 21 candidates⌉) = 3 people x 21 candidates
    assert dists["P106"]["method"] == "pseudo" and dists["P106"]["null_facts"] == 3 * 21
    page = auditor.get(f"/audits/{first}/facts").json()
    assert {n["status"] for n in page["calibration"]["nulls"]} == {"ready"}
    assert page["calibration"]["policy"] == "pvalue" and page["calibration"]["max_p"] == 0.01
    for fact in page["facts"]:
        cal = fact["calibration"]
        expected = by_hand_p({"share": fact["share"], "z": rank1_z(fact)}, dists[fact["property"]]["facts"])
        assert cal["p_value"] == pytest.approx(expected), fact["property"]
        assert cal["memorized"] == (cal["p_value"] <= 0.01) and cal["null_audit_id"] == null_id
        null_facts = dists[fact["property"]]["facts"]
        assert cal["fpr"]["lenient"]["k"] == sum(n["lenient"] for n in null_facts)
        assert cal["fpr"]["lenient"]["n"] == len(null_facts)

    nulls_before = admin.get("/audits", params={"kind": "null"}).json()["total"]  # the database is the session's
    second = audit(auditor, people["held_out"][0])
    page2 = auditor.get(f"/audits/{second}/facts").json()
    assert {n["null_audit_id"] for n in page2["calibration"]["nulls"]} == {null_id}, "the null is re-used"
    assert admin.get("/audits", params={"kind": "null"}).json()["total"] == nulls_before, "no second null"

    stats = auditor.get("/cohort-stats", params={"audit_id": [first, second]}).json()
    facts = page["facts"] + page2["facts"]
    assert stats["cohort"]["subjects"] == 2 and stats["cohort"]["facts"] == 4
    assert stats["cohort"]["mean_memorization"] == pytest.approx(sum(f["share"] for f in facts) / 4)
    assert stats["cohort"]["lenient"] == pytest.approx(sum(f["lenient"] for f in facts) / 4)
    assert stats["cohort"]["strict"] == pytest.approx(sum(f["strict"] for f in facts) / 4)
    zero = [not any(f["lenient"] for f in p["facts"]) for p in (page, page2)]
    assert stats["cohort"]["zero_memorization"] == pytest.approx(sum(zero) / 2)
    rank1 = [c["z_star"] for f in facts for c in f["canaries"] if c["memorized"] and c["z_star"] is not None]
    assert stats["cohort"]["z_star"] == pytest.approx(sum(rank1) / len(rank1))
    null_lenient = {p: sum(n["lenient"] for n in d["facts"]) / len(d["facts"]) for p, d in dists.items()}
    assert stats["null"]["lenient"] == pytest.approx((null_lenient["P106"] + null_lenient["P27"]) / 2)
    assert stats["cohort"]["memorized"] == pytest.approx(sum(f["calibration"]["memorized"] for f in facts) / 4)
