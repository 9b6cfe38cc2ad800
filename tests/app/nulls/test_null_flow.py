"""Null calibration through the service on the ground-truth model: a subject audit's facts first say "pending"
and queue a null audit, then carry p-values that can be recomputed from the stored null facts; the null is re-used
by the next audit with the same configuration; cohort statistics match a hand computation from the facts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from app.settings import get_settings
from core.catalog import load_catalog
from core.measures.null import TAIL_EXCEEDANCES, tail_p_value
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


def by_hand_p(statistic: float, null_facts: list[dict]) -> float:
    """(1 + null facts whose statistic is at least this fact's) / (1 + N), or the fitted tail where fewer than 10
    reach it (core.measures.null.tail_p_value, checked by hand in tests/core/measures)."""
    values = [n["statistic"] for n in null_facts]
    k = sum(v >= statistic for v in values)
    if k < TAIL_EXCEEDANCES:
        tail = tail_p_value(values, statistic)
        if tail is not None:
            return tail
    return (1 + k) / (1 + len(values))


def by_hand_statistic(fact: dict) -> float:
    """Mean over templates of (best truth's score − mean counterfactual score) / their population std."""
    zs = []
    for c in (c for c in fact["canaries"] if c["kind"] != "context"):
        truths = [x["score"] for x in c["candidates"] if x["is_ground_truth"]]
        others = [x["score"] for x in c["candidates"] if not x["is_ground_truth"]]
        mean = sum(others) / len(others)
        std = math.sqrt(sum((o - mean) ** 2 for o in others) / len(others))
        zs.append((max(truths) - mean) / std)
    return sum(zs) / len(zs)


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
    # a full null is the people's own values, in every shape (1, 2, 3 true values: the own value and the first
    # counterfactuals); every candidate alone and disjoint sets of 2 and 3 are listed too (what pseudo-truths say)
    per_person = 3 + 21 + 21 // 2 + 21 // 3
    in_pool = [f for f in dists["P27"]["facts"] if f["in_pool"]]
    assert len(in_pool) == 30 * per_person and "pseudo_truths" in dists["P27"]["summary"]
    # out of the pool: each person's own out-of-pool citizenship (core.names.out_of_pool), in every shape (fewer
    # where a counterfactual is merged into it as a near-duplicate), never a pool value
    outside = [f for f in dists["P27"]["facts"] if not f["in_pool"]]
    assert {f["person"] for f in outside} == set(range(30)) and all(f["assigned"] for f in outside)
    assert 30 * 2 <= len(outside) <= 30 * 3 and not {f["value"] for f in outside} & set(load_catalog().get("P27").pool)
    assert set(dists["P27"]["summary"]["shapes"]) >= {"1", "2", "3", "out_of_pool:2", "out_of_pool:3"}
    # pseudo-truths: max(3 people, ⌈30 / 21 candidates⌉) = 3 people x 21 candidates; 10 out-of-pool truths each
    assert dists["P106"]["method"] == "pseudo" and dists["P106"]["null_facts"] == 3 * 21
    assert sum(not f["in_pool"] and f["n_values"] == 1 for f in dists["P106"]["facts"]) == 3 * 10
    for d in dists.values():  # the null facts that judge a one-valued fact in the pool
        d["facts"] = [
            f for f in d["facts"] if f["n_values"] == 1 and f["in_pool"] and (f["assigned"] or d["method"] == "pseudo")
        ]
    assert dists["P27"]["method"] == "full" and dists["P27"]["people"] == 30 and dists["P27"]["null_facts"] == 30
    assert len(dists["P27"]["facts"]) == 30 and len(dists["P106"]["facts"]) == 3 * 21
    page = auditor.get(f"/audits/{first}/facts").json()
    detailed = {
        f["property"]: f for f in auditor.get(f"/audits/{first}/facts", params={"detail": "candidates"}).json()["facts"]
    }
    assert {n["status"] for n in page["calibration"]["nulls"]} == {"ready"}
    assert page["calibration"]["policy"] == "pvalue" and page["calibration"]["max_p"] == 0.01
    for fact in page["facts"]:
        cal = fact["calibration"]
        shape = {"n_values": 1, "in_pool": True, "statistic": "truth-z-1", "judgments": 1}
        assert cal["null_shape"] == shape | {"null_facts": len(dists[fact["property"]]["facts"])}
        assert cal["statistic"] == pytest.approx(by_hand_statistic(detailed[fact["property"]]))
        expected = by_hand_p(cal["statistic"], dists[fact["property"]]["facts"])
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
