"""Batches end to end on real Redis, Postgres and `memaudit worker` processes, on the ground-truth model:
two workers run a 20-person batch, every audit exactly once, each generic-subject sentence scored once in all;
a single audit submitted while a batch runs finishes before the batch (fair scheduling)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.db.engine import session_scope
from app.db.models import Audit, NllCache
from app.nll_cache.repository import text_hash
from tests.conftest import REPO, start_worker, stop_worker, wait_for

MANIFEST = REPO / "workers" / "groundtruth" / "manifest.json"
MODEL = "groundtruth-tiny"
# Small enough to keep the suite fast; α < 1 so that the generic subject's sentences are scored (at α = 1 they
# cancel from s exactly and are never scored).
OPTIONS = {"paraphrases": 1, "counterfactuals": 8, "similar_names": 1, "alpha": 0.5, "near_duplicates": False}


@pytest.fixture(autouse=True)
def small_nulls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The null a batch (and a single audit) creates runs beside it on a batch lane; no test here waits for it or
    reads its rates, and the workers are stopped with it half done. At the default size (200 null facts per
    property: 200 people for a full null) its chunks took some 3x the audits' own scoring (py-spy over this file:
    38 % of all samples in null jobs, 13 % in the audits); at 20 (the null's least number of people) it still runs
    beside the batch, on the same generic sentences under the same lock. Set before the workers and the API read it
    (``pg_env`` clears the cached settings after)."""
    monkeypatch.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", "20")


def roster(split: str, n: int, start: int = 0) -> list[dict]:
    people = json.loads(MANIFEST.read_text())[split][start : start + n]
    return [{"name": p["name"], **{pid: values for pid, values in p["facts"].items()}} for p in people]


@pytest.fixture
def two_workers(pg_env: dict[str, str], tmp_path: Path) -> Iterator[list[subprocess.Popen]]:
    procs = [start_worker(pg_env, tmp_path / f"worker-{i}.log") for i in range(2)]
    yield procs
    for proc in procs:
        proc.terminate()  # both at once: their 5 s of grace overlap
    for proc in procs:
        stop_worker(proc)


def wait_batch(api, batch_id: str, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = api.get(f"/batches/{batch_id}").json()
        if body["status"] in ("finished", "cancelled"):
            return body
        time.sleep(0.5)
    raise AssertionError(f"batch {batch_id} did not finish in {timeout} s (last: {body})")


def batch_audits(api, batch_id: str) -> list[dict]:
    return api.get(f"/batches/{batch_id}/audits", params={"page_size": 200}).json()["items"]


def test_two_workers_run_a_batch_once_and_share_generic_sentences(two_workers, api_factory):
    api = api_factory("auditor")
    created = api.post("/batches", json={"model": MODEL, "options": OPTIONS, "people": roster("trained", 20)})
    assert created.status_code == 202, created.text
    batch = wait_batch(api, created.json()["id"])
    assert batch["progress"]["succeeded"] == 20, batch
    audits = batch_audits(api, batch["id"])
    with session_scope() as s:  # exactly once: no audit was claimed by a second worker, or twice by one
        attempts = dict(s.execute(select(Audit.id, Audit.attempts).where(Audit.batch_id == batch["id"])).all())
    assert sorted(attempts.values()) == [1] * 20, attempts
    generic, scored, needed = set(), 0, 0
    for audit in audits:
        scored += audit["summary"]["scoring"]["generic_scored"]
        own = set()
        for fact in api.get(f"/audits/{audit['id']}/facts", params={"detail": "candidates"}).json()["facts"]:
            for canary in fact["canaries"]:
                own.update(c["generic_sentence"] for c in canary["candidates"])
        generic |= own
        needed += len(own)
    # the batch's null (created with it, run beside it) scores some of the same generic sentences under the same
    # shared lock: the audits score the rest, none twice
    assert 0 < scored <= len(generic), "each generic-subject sentence scored at most once across both workers"
    assert needed > 2 * scored, "the audits of a batch reuse each other's generic sentences"
    hashes = [text_hash(g) for g in generic]
    with session_scope() as s:
        cached = s.scalar(select(func.count()).select_from(NllCache).where(NllCache.text_hash.in_(hashes)))
    assert cached == len(generic)
    report = api.get(f"/batches/{batch['id']}/report").json()
    assert report["cohorts"][MODEL]["cohort"]["subjects"] == 20


def test_a_single_audit_submitted_during_a_batch_finishes_first(rq_worker, api_factory):
    api = api_factory("auditor")
    batch = api.post("/batches", json={"model": MODEL, "options": OPTIONS, "people": roster("held_out", 12)}).json()
    deadline = time.monotonic() + 120
    while api.get(f"/batches/{batch['id']}").json()["progress"]["succeeded"] < 1:  # the worker is busy with it
        assert time.monotonic() < deadline, "the batch did not start"
        time.sleep(0.2)
    person = roster("trained", 1)[0]
    facts = [{"property": p, "value": v} for p, values in person.items() if p != "name" for v in values]
    single = api.post(
        "/audits",
        json={
            "kind": "subject",
            "model": MODEL,
            "options": OPTIONS,
            "subject": {"name": person["name"], "facts": facts},
        },
    ).json()
    assert wait_for(api, single["id"], timeout=120)["status"] == "succeeded"
    progress = api.get(f"/batches/{batch['id']}").json()["progress"]
    assert progress["queued"] > 0, f"FIFO would have run the whole batch first: {progress}"
    finished = wait_batch(api, batch["id"])
    assert finished["progress"]["succeeded"] == 12


def test_the_batch_report_matches_a_hand_computation_and_compares_models(rq_worker, api_factory):
    from app.settings import GROUNDTRUTH_DIR

    api = api_factory("auditor")
    same_weights = f"hf:{GROUNDTRUTH_DIR}"  # the same model under a second name: the comparison must agree
    people = roster("trained", 3) + roster("held_out", 2)
    created = api.post("/batches", json={"models": [MODEL, same_weights], "options": OPTIONS, "people": people})
    batch = wait_batch(api, created.json()["id"])
    assert batch["progress"]["succeeded"] == 10, batch
    report = api.get(f"/batches/{batch['id']}/report").json()
    # By hand, from each canary's rank: a template memorizes a fact when a true value ranks first.
    shares, strict, lenient, z_rank1, empty_subjects = [], [], [], [], 0
    audits = [a for a in batch_audits(api, batch["id"]) if a["model"] == MODEL]
    for audit in audits:
        facts = api.get(f"/audits/{audit['id']}/facts").json()["facts"]
        any_memorized = False
        for fact in facts:
            hits = [c["rank"] == 1 and c["memorized"] for c in fact["canaries"] if c["kind"] != "context"]
            shares.append(sum(hits) / len(hits))
            strict.append(all(hits))
            lenient.append(any(hits))
            any_memorized |= any(hits)
            z_rank1 += [c["z_star"] for c in fact["canaries"] if c["kind"] != "context" and c["memorized"]]
        empty_subjects += not any_memorized
    cohort = report["cohorts"][MODEL]["cohort"]
    assert cohort["subjects"] == 5 and cohort["facts"] == len(shares)
    assert cohort["mean_memorization"] == pytest.approx(sum(shares) / len(shares))
    assert cohort["strict"] == pytest.approx(sum(strict) / len(strict))
    assert cohort["lenient"] == pytest.approx(sum(lenient) / len(lenient))
    assert cohort["z_star"] == pytest.approx(sum(z_rank1) / len(z_rank1))
    assert cohort["zero_memorization"] == pytest.approx(empty_subjects / 5)
    assert sum(lenient) > 0, "trained people: the ground-truth model memorizes some of their facts"
    forget = api.get("/forget-set", params={"batch_id": batch["id"], "policy": "lenient"}).text.splitlines()
    assert json.loads(forget[-1])["_end"]["records"] >= 2 * sum(lenient), "both models' memorized facts"
    other = api.get("/forget-set", params={"batch_id": "0" * 32, "policy": "lenient"}).text.splitlines()
    assert json.loads(other[-1])["_end"]["records"] == 0
    (pair,) = report["comparison"]
    assert (pair["people"], pair["facts"]) == (5, len(shares))
    assert pair["only_a"] == pair["only_b"] == 0 and pair["both"] == sum(lenient)


def test_two_keys_batches_take_turns(rq_worker_later, api_factory):
    first, second = api_factory("auditor"), api_factory("auditor")  # consecutive keys: different batch lanes
    big = first.post("/batches", json={"model": MODEL, "options": OPTIONS, "people": roster("held_out", 10)}).json()
    small = second.post("/batches", json={"model": MODEL, "options": OPTIONS, "people": roster("trained", 2)}).json()
    rq_worker_later()  # after both: how many of the big batch ran first must not depend on how fast the POSTs were
    assert wait_batch(second, small["id"], timeout=120)["progress"]["succeeded"] == 2
    assert wait_batch(first, big["id"])["progress"]["succeeded"] == 10
    # Counted from the audits' own times, not from a poll after the small batch ended: on a loaded machine the
    # big batch ran several more audits between the small one's end and the next poll (CI saw 6 of 10 started).
    with session_scope() as s:
        small_done = s.scalar(select(func.max(Audit.finished_at)).where(Audit.batch_id == small["id"]))
        big_before = s.scalar(select(func.count()).where(Audit.batch_id == big["id"], Audit.started_at < small_done))
    # turns job by job: B S B S, so 2 of the big batch started before the small one ended; one queue: all 10
    assert big_before <= 4, f"{big_before} of the big batch started before the small batch ended"
