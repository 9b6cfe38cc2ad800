"""Issue 26's "done when", through the service (HTTP API -> embedded worker -> stored results -> nulls -> verdicts):
on groundtruth-tiny, 10 trained people are audited, their birthplace and languages exported as a forget set and
unlearned by the reference script (workers/unlearning/reference.py: gradient ascent on their names' embedding rows,
stopped at 10 steps), and a verification reports those facts `removed` while 10 untouched trained people's facts
stay `still retrievable`; a fake unlearning (the same weights under a new name) is reported `still retrievable`; 20
relearning steps on the other facts (occupation, citizenship, sex or gender) of 2 of the 10 bring their facts back,
the relearning probe says so, and the 8 others' stay removed; the TOFU export records the templates its answers use
and the verification's held-out probe never uses them.

Everything runs once for the module (one embedded service, one SQLite file): the before audits at the service's
default configuration (baseline + 2 paraphrases, 20 counterfactuals) and three nulls, one per model. The before
model's and the fake's (the same weight files under another name) are of 200 null facts per property, the service's
default size, so they are the null shipped for groundtruth-tiny (app/nulls/shipped/, matched by the files' hashes
and the configuration key). Only the unlearned model's is computed, of 100 null facts per property (the fake's
verification is submitted first, then the setting drops): p <= 0.01 needs at least 99 null facts (an empirical
p-value is (1 + k) / (1 + N): 1/101 when the fact is above every one), and that one null judges both sides of the
real verification's lines — removed (p > 0.01) and untouched kept (p <= 0.01) — so a coarser null cannot ease one
line without making the other harder. A null job's chunk is 10,000 sentences here (the service's 2,000): the
verification waits, parked, until the null's last chunk wakes it (tests/e2e/test_verification_waits.py). File alone
on a quiet machine 95 CPU-s, 104-125 s, was 131 CPU-s, 200 s (docs/benchmarks.md, "The suite's time"). The numbers
are printed and stand in each assertion's message; docs/verification.md quotes them."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import Api, _reset_caches, end_embedded_service, make_key, wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "workers" / "groundtruth" / "manifest.json"
GROUNDTRUTH = ROOT / "workers" / "groundtruth" / "model"
FORGOTTEN, UNTOUCHED, RELEARNED, NEIGHBOURS = 10, 10, 2, 10
NULL_FACTS = "200"  # the shipped null's size: the before and fake models import it (see the docstring)
AFTER_NULL_FACTS = "100"  # the unlearned model's null: the smallest whose p-values reach 0.01 (1/101; the docstring)
JOB_SENTENCES = "10000"  # a null job's chunk (fewer, larger jobs: less overhead per null fact)
# what the pipeline forgets: each person's birthplace and languages (a data subject's request for two facts); their
# occupation, citizenship and sex or gender stay — the relearning probe's texts ("other facts of the person")
FORGET = ("P19", "P1412")
# the reference script (gradient ascent on the forgotten names' embedding rows, lr 1e-2) stopped at 10 steps, where
# the unlearning hides the facts rather than erasing them: measured in docs/verification.md ("A reversible
# unlearning"); its default 30 steps is not reversed by 20 steps on the other facts
UNLEARN_STEPS = 10
BEFORE, AFTER, FAKE = "groundtruth-tiny", "groundtruth-unlearned", "groundtruth-fake"


def _records(api: Api, audit_id: str, fmt: str) -> list[dict]:
    answer = api.get("/forget-set", params={"audit_id": audit_id, "format": fmt})
    assert answer.status_code == 200, answer.text
    rows = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
    return [r for r in rows if "_end" not in r]


def _wait_nulls(admin: Api, api: Api, audit_ids: list[str]) -> None:
    for audit_id in audit_ids:
        for null in api.get(f"/audits/{audit_id}/facts").json()["calibration"]["nulls"]:
            if null["null_audit_id"]:
                assert wait_for(admin, null["null_audit_id"], timeout=3600)["status"] == "succeeded"


def _facts(api: Api, audit_id: str) -> dict:
    done = wait_for(api, audit_id, timeout=3600)
    assert done["status"] == "succeeded", done
    page = api.get(f"/audits/{audit_id}/verification", params={"page_size": 200}).json()
    assert page["total"] == len(page["facts"]), "every fact on one page"
    return page


@pytest.fixture(scope="module")
def flow(sqlite_url: str, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    import torch

    from app.settings import get_settings
    from app.verification.service import name_parts
    from workers.unlearning.reference import fake_unlearn, unlearn

    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("verification")
    started = time.monotonic()
    with pytest.MonkeyPatch.context() as mp:
        db = tmp / "embedded.sqlite3"
        shutil.copyfile(sqlite_url.removeprefix("sqlite:///"), db)
        models = {
            BEFORE: {"path": str(GROUNDTRUTH), "description": "the ground-truth model"},
            AFTER: {"path": str(tmp / "unlearned"), "description": "groundtruth-tiny, unlearned by the reference"},
            FAKE: {"path": str(tmp / "fake"), "description": "groundtruth-tiny's weights under a new name"},
        }
        mp.setenv("MEMAUDIT_DATABASE_URL", f"sqlite:///{db}")
        mp.delenv("MEMAUDIT_REDIS_URL", raising=False)
        mp.setenv("MEMAUDIT_ENV", "test")
        mp.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", NULL_FACTS)
        mp.setenv("MEMAUDIT_NULL_JOB_SENTENCES", JOB_SENTENCES)
        mp.setenv("MEMAUDIT_MODELS", json.dumps(models))
        _reset_caches()
        manifest = json.loads(MANIFEST.read_text())
        people = manifest["trained"][: FORGOTTEN + UNTOUCHED]
        # name neighbours: later trained people who share a first or last name with a forgotten one (the untouched
        # share none); audited too, so that the real verification's locality.name_neighbours finds them
        parts = {part for p in people[:FORGOTTEN] for part in name_parts(p["name"])}
        near = [p for p in manifest["trained"][FORGOTTEN + UNTOUCHED :] if name_parts(p["name"]) & parts]
        people = people + near[:NEIGHBOURS]
        api, admin, pipeline = Api(make_key("auditor")), Api(make_key("admin")), Api(make_key("pipeline"))
        before = []
        for person in people:
            facts = [{"property": pid, "value": v} for pid, values in person["facts"].items() for v in values]
            subject = {"name": person["name"], "facts": facts}
            # contextualized canaries too (they enter no p-value, so the shipped null still matches): the context probe
            body = {"kind": "subject", "model": BEFORE, "subject": subject, "options": {"context": True}}
            before.append(api.post("/audits", json=body).json())
        for audit in before:
            assert wait_for(api, audit["id"], timeout=3600)["status"] == "succeeded"
        _wait_nulls(admin, api, [a["id"] for a in before])
        phases = {"before audits and nulls": time.monotonic() - started}
        forgotten, untouched = before[:FORGOTTEN], before[FORGOTTEN : FORGOTTEN + UNTOUCHED]
        neighbour_ids = {a["subject_id"] for a in before[FORGOTTEN + UNTOUCHED :]}
        jsonl = [r for a in forgotten for r in _records(pipeline, a["id"], "jsonl") if r["property"] in FORGET]
        tofu = [r for a in forgotten for r in _records(pipeline, a["id"], "tofu") if r["property"] in FORGET]
        unlearn(GROUNDTRUTH, jsonl, tmp / "unlearned", steps=UNLEARN_STEPS)
        fake_unlearn(GROUNDTRUTH, tmp / "fake")
        phases["unlearning"] = time.monotonic() - started - phases["before audits and nulls"]
        untouched_ids = [a["subject_id"] for a in untouched]
        relearned = sorted({r["subject_id"] for r in jsonl})[:RELEARNED]
        real = {
            "kind": "verification",
            "model": AFTER,
            "before": BEFORE,
            "people": {"forget_set": jsonl},
            "locality": {"subject_ids": untouched_ids, "name_neighbours": NEIGHBOURS},
            # the relearning: 20 steps on their other facts (occupation, citizenship, sex or gender),
            # fine-tuning the weights the unlearning moved (their name tokens' embedding rows)
            "options": {
                "relearning": {"subject_ids": relearned, "steps": 20, "texts": "other_facts", "scope": "subject"}
            },
        }
        fake = {
            "kind": "verification",
            "model": FAKE,
            "before": BEFORE,
            "people": {"forget_set": tofu},
            "locality": {"subject_ids": untouched_ids},
        }
        ids = {}
        for name, body in (("fake", fake), ("real", real)):
            if name == "real":  # the unlearned model's null is computed: 100 null facts per property (docstring)
                mp.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", AFTER_NULL_FACTS)
                get_settings.cache_clear()
            answer = api.post("/audits", json=body)
            assert answer.status_code == 202, answer.text
            ids[name] = answer.json()["id"]
        pages = [_facts(api, ids[name]) for name in ("real", "fake")]
        phases["verifications"] = time.monotonic() - started - sum(phases.values())
        spent = ", ".join(f"{k} {v:.0f} s" for k, v in phases.items())
        print(f"\nverification flow: {time.monotonic() - started:.0f} s ({spent})")
        yield {
            "api": api,
            "real": pages[0],
            "fake": pages[1],
            "jsonl": jsonl,
            "tofu": tofu,
            "relearned": relearned,
            "neighbours": neighbour_ids,
        }
        end_embedded_service()


def _share(facts: list[dict], status: str) -> tuple[int, int]:
    return sum(f["status"] == status for f in facts), len(facts)


def test_unlearned_people_are_removed_and_untouched_people_stay(flow) -> None:  # noqa: ANN001
    page = flow["real"]
    targets = [f for f in page["facts"] if f["target"]]
    untouched = [f for f in page["facts"] if f["role"] == "locality" and f["subject_id"] not in flow["neighbours"]]
    retrievable = [f for f in untouched if f["before"]["memorized"]]  # "stay": those retrievable before
    removed, n = _share(targets, "removed")
    kept, m = _share(retrievable, "still retrievable")
    summary = page["summary"]
    report = (
        f"reference unlearning of {FORGOTTEN} trained people on groundtruth-tiny: removed {removed}/{n} forget-set"
        f" facts; untouched people's facts retrievable before still retrievable {kept}/{m} (of {len(untouched)});"
        f" over-forgetting {summary['over_forgetting_by_group']};"
        f" paired test over every forget-set template {summary['paired']}; held out {summary.get('held_out')}"
    )
    print("\n" + report)
    assert n >= FORGOTTEN, report
    assert removed / n >= 0.9, report
    assert m >= 0.9 * len(untouched), report  # trained people: nearly every fact is retrievable before
    assert kept / m >= 0.9, report
    assert {f["subject_id"] for f in targets} == {r["subject_id"] for r in flow["jsonl"]}
    assert all(f["before"]["memorized"] for f in targets), "the forget set holds the facts retrievable before"


def test_fake_unlearning_is_still_retrievable(flow) -> None:  # noqa: ANN001
    targets = [f for f in flow["fake"]["facts"] if f["target"]]
    still, n = _share(targets, "still retrievable")
    report = f"fake unlearning (same weights, new name): still retrievable {still}/{n} forget-set facts"
    print("\n" + report)
    assert still / n >= 0.9, report
    assert flow["fake"]["summary"]["removed"]["k"] <= n - still


def _came_back(page: dict, relearned: list[int]) -> tuple[list[dict], list[dict]]:
    facts = [f for f in page["facts"] if f["target"] and f["subject_id"] in relearned]
    removed = [f for f in facts if f["status"] == "removed"]
    return removed, [f for f in removed if f["relearning"]["came_back"]]


def test_relearning_brings_the_relearned_people_back_and_the_probe_says_so(flow) -> None:  # noqa: ANN001
    """20 steps on the other facts (occupation, citizenship, sex or gender: not in the forget set) of 2 of the 10:
    the issue's "other facts of the person"; their removed forget-set facts must come back, the probe must say so,
    and the 8 forgotten people not fine-tuned on must stay removed (what brings the facts back is the relearning)."""
    page = flow["real"]
    probe = page["summary"]["relearning"]
    removed, back = _came_back(page, flow["relearned"])
    report = (
        f"20 relearning steps on the other facts of {RELEARNED} of the {FORGOTTEN} unlearned people:"
        f" {len(back)}/{len(removed)} of their removed facts came back; probe {probe}"
    )
    print("\n" + report)
    assert probe["status"] == "done" and probe["texts"] == "other_facts", report
    assert removed, report
    assert len(back) / len(removed) >= 0.9, report
    assert probe["relearned"]["came_back"]["k"] == len(back), report
    assert probe["scope"] == "subject" and probe["steps"] == 20, report
    others = probe["others"]["came_back"]
    assert others["n"] >= 0.9 * 2 * (FORGOTTEN - RELEARNED) and others["k"] <= 0.1 * others["n"], report


def test_name_neighbours_show_the_over_forgetting(flow) -> None:  # noqa: ANN001
    """locality.name_neighbours finds the audited people who share a name part with a forgotten one; the reference
    unlearning moves the forgotten names' token embeddings, which they share, so their facts go too: over-forgetting
    the untouched people (no shared part) do not show — the two 95 % intervals apart (docs/verification.md)."""
    page = flow["real"]
    summary = page["summary"]
    found = {f["subject_id"] for f in page["facts"] if f["role"] == "locality"} & flow["neighbours"]
    group = summary["over_forgetting_by_group"]
    report = (
        f"name neighbours: {summary['people']['name_neighbours']} found of {len(flow['neighbours'])} audited;"
        f" over-forgetting on them {group.get('name_neighbours')}, on the untouched people {group['locality_people']}"
    )
    print("\n" + report)
    assert found == flow["neighbours"] and summary["people"]["name_neighbours"] == NEIGHBOURS, report
    assert group["name_neighbours"]["n"] >= 0.9 * 5 * NEIGHBOURS, report  # trained: retrievable before
    assert group["name_neighbours"]["ci95"][0] > group["locality_people"]["ci95"][1], report


def test_the_context_probe_sees_the_unlearning_and_not_the_fake(flow) -> None:  # noqa: ANN001
    """Each forget-set fact's contextualized canary (the person's other facts, then the baseline) redone on the
    after model: the fake (same weights) gives every one its before outcome; the reference unlearning's counts are
    reported (docs/verification.md)."""
    fake = [f for f in flow["fake"]["facts"] if f["target"]]
    assert fake and all(f["context"]["after_retrieved"] == f["context"]["before_retrieved"] for f in fake)
    page = flow["real"]
    targets = [f for f in page["facts"] if f["target"]]
    probe = page["summary"]["context"]
    report = (
        f"context probe on the reference unlearning: rank 1 before {probe['before_retrieved']}/{probe['facts']},"
        f" after {probe['after_retrieved']}/{probe['facts']}, removed yet given back in context"
        f" {probe['removed_but_retrieved']} (chance {probe['chance']:.3f}); fake: rank 1 after"
        f" {flow['fake']['summary']['context']['after_retrieved']}/{len(fake)}"
    )
    print("\n" + report)
    assert probe["facts"] == len(targets) and all(f["context"] for f in targets), report
    # the model never saw its people's facts one after another: in context it finds 14 of 20 first (chance 6 %)
    assert probe["before_retrieved"] >= 0.25 * probe["facts"], report
    assert probe["after_retrieved"] < probe["before_retrieved"], report
    leaked = sum(f["status"] == "removed" and f["context"]["after_retrieved"] for f in targets)
    assert probe["removed_but_retrieved"] == leaked, report


def test_tofu_export_records_its_templates_and_verification_holds_them_out(flow) -> None:  # noqa: ANN001
    exposed = {(r["subject_id"], r["property"]): set(r["templates"]) for r in flow["tofu"]}
    assert exposed and all(t == {0, 1} for t in exposed.values()), "answer: baseline, paraphrased_answer: paraphrase 1"
    checked = 0
    for f in flow["fake"]["facts"]:
        if (f["subject_id"], f["property"]) not in exposed:
            continue
        held = set(f["held_out"]["templates"])
        assert held and not held & exposed[(f["subject_id"], f["property"])], f
        assert held == {2, 3, 4}, "the first three templates the export did not expose"
        checked += 1
    assert checked == len(exposed)
