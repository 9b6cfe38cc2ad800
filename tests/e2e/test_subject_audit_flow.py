"""End to end: HTTP API → Postgres → Redis → a real RQ worker process → stored results → forget set,
on the project's ground-truth model (whose training membership is known); and the same flow on the
embedded default (SQLite + in-process worker). The RQ tests share one worker process and database (each audits
its own people): ``shared_worker``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import wait_for
from workers.lm.registry import HF_UNAVAILABLE

MANIFEST = Path(__file__).resolve().parents[2] / "workers" / "groundtruth" / "manifest.json"
PARAPHRASES = 3  # baseline + 3 paraphrases per fact keeps the suite fast


@pytest.fixture(autouse=True)
def small_nulls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each submission creates its configuration's null on a batch lane, which the shared worker runs between the
    tests' audits (and a test waits for the chunk in progress); no test reads its rates (the forget set asks for
    `lenient`). At the default size (200 null facts per property: 200 people x 252 sentences for a full null) it
    ran on to the module's end; at 20 (the least number of people) it is a few chunks."""
    monkeypatch.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", "20")


def people(split: str, n: int) -> list[dict]:
    return json.loads(MANIFEST.read_text())[split][:n]


def payload(person: dict, **options) -> dict:
    facts = [{"property": pid, "value": v} for pid, values in person["facts"].items() for v in values]
    return {
        "kind": "subject",
        "model": "groundtruth-tiny",
        "subject": {"name": person["name"], "facts": facts},
        "options": {"paraphrases": PARAPHRASES, **options},
    }


def lenient_rate(api, audit_ids: list[str]) -> float:
    facts = [f for aid in audit_ids for f in api.get(f"/audits/{aid}/facts").json()["facts"]]
    return sum(f["lenient"] for f in facts) / len(facts)


def run_audits(api, persons: list[dict]) -> list[str]:
    ids = [api.post("/audits", json=payload(p)).json()["id"] for p in persons]
    for aid in ids:
        done = wait_for(api, aid)
        assert done["status"] == "succeeded", done
        assert done["progress"]["done"] == done["progress"]["total"] > 0
    return ids


def test_trained_subjects_are_memorized_far_above_held_out_ones(shared_worker, api_factory):
    api = api_factory("auditor")
    # A job whose model cannot load fails with a readable error, and the worker keeps serving.
    bad = api.post("/audits", json={**payload(people("trained", 1)[0]), "model": "hf:/nonexistent/model-dir"})
    failed = wait_for(api, bad.json()["id"])
    assert failed["status"] == "failed" and failed["error"] == HF_UNAVAILABLE, failed  # names no path

    trained = run_audits(api, people("trained", 4))
    held_out = run_audits(api, people("held_out", 4))
    rate_trained, rate_held = lenient_rate(api, trained), lenient_rate(api, held_out)
    assert rate_trained >= 0.8 and rate_held <= 0.3 and rate_trained - rate_held >= 0.5, (
        f"lenient memorization: trained {rate_trained:.2f}, held-out {rate_held:.2f}"
    )
    print(f"\nlenient memorization on groundtruth-tiny: trained {rate_trained:.2f}, held-out {rate_held:.2f}")


def test_results_can_be_recomputed_and_reaudits_are_free(shared_worker, api_factory):
    from core.measures.wikimem import calibrated_scores, ranks

    api = api_factory("auditor")
    person = people("trained", 6)[5]
    first = run_audits(api, [person])[0]
    detail = api.get(f"/audits/{first}/facts", params={"detail": "candidates"}).json()
    canary = detail["facts"][0]["canaries"][0]
    cands = canary["candidates"]
    assert len(cands) == 21 and cands[0]["sentence"].count(person["name"]) == 1  # the truth + 20 by default
    # α = 1 (the default): the generic subject cancels from s, so it is not scored (nll_generic null)
    assert all(c["nll_generic"] is None for c in cands)
    scores = calibrated_scores(
        [c["nll_subject"] for c in cands], None, list(zip(*[c["nll_similar"] for c in cands], strict=True))
    )
    assert ranks(scores, [c["is_ground_truth"] for c in cands]) == [c["rank"] for c in cands]
    second = run_audits(api, [person])[0]
    scoring = api.get(f"/audits/{second}").json()["summary"]["scoring"]
    assert scoring["scored"] == 0 and scoring["cached"] == scoring["sentences"] > 0, scoring


def test_forget_set_and_erasure(shared_worker, api_factory):
    api = api_factory("auditor")
    person = people("trained", 8)[7]
    aid = run_audits(api, [person])[0]
    # lenient: the default policy (p-values) needs the configuration's null, which may still be running
    exported = api_factory("pipeline").get("/forget-set", params={"audit_id": aid, "policy": "lenient"})
    *rows, end = [json.loads(line) for line in exported.text.splitlines()]
    assert end == {"_end": {"records": len(rows)}}
    assert rows and all(r["subject"] == person["name"] and r["audit_id"] == aid for r in rows)
    csv_params = {"audit_id": aid, "format": "csv", "policy": "lenient"}
    csv_text = api_factory("pipeline").get("/forget-set", params=csv_params).text
    assert len(csv_text.strip().splitlines()) == len(rows) + 1

    subject_id = api.get(f"/audits/{aid}").json()["subject_id"]
    erased = api.delete(f"/subjects/{subject_id}")
    assert erased.status_code == 200 and erased.json()["cached_sentences"] > 0, erased.text
    assert api.get(f"/audits/{aid}").status_code == 404
    assert api_factory("pipeline").get("/forget-set", params={"audit_id": aid}).text == '{"_end": {"records": 0}}\n'
    assert api.delete(f"/subjects/{subject_id}").status_code == 404


def test_embedded_default_runs_the_same_flow(sqlite_env, api_factory):
    api = api_factory("auditor")
    trained = run_audits(api, people("trained", 2))
    held_out = run_audits(api, people("held_out", 2))
    rate_trained, rate_held = lenient_rate(api, trained), lenient_rate(api, held_out)
    assert rate_trained >= 0.8 and rate_trained > rate_held, (rate_trained, rate_held)


def test_no_personal_data_in_redis_or_worker_logs(shared_worker, api_factory, redis_server, worker_log):
    import redis

    api = api_factory("auditor")
    person = people("held_out", 6)[5]
    aid = api.post("/audits", json=payload(person)).json()["id"]
    client = redis.Redis.from_url(redis_server.url)
    blobs = []
    for key in client.scan_iter("*"):
        kind = client.type(key).decode()
        if kind == "hash":
            blobs.extend(v for v in client.hgetall(key).values())
        elif kind == "string":
            blobs.append(client.get(key))
        elif kind == "list":
            blobs.extend(client.lrange(key, 0, -1))
    text = b" ".join(b for b in blobs if isinstance(b, bytes))
    assert aid.encode() in text  # the job is there, by id
    assert person["name"].encode() not in text
    assert all(v.encode() not in text for values in person["facts"].values() for v in values if len(v) > 4)
    assert wait_for(api, aid)["status"] == "succeeded"
    logged = worker_log.read_text()
    assert aid in logged and person["name"] not in logged
