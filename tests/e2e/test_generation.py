"""Mode generation through the service (HTTP API -> embedded worker -> answers read and stored -> a null of fictitious
people asked the same way -> calibrated facts), on what it must find and on what it must not:

- groundtruth-tiny: trained people's facts are flagged (recall >= 0.9) and held-out people's are not (false-positive
  rate <= 0.02) at p <= 0.01. Fixed before the run: K = 10 answers of the baseline's text before the value, temperature
  1, 100 null facts per property (p <= 0.01 needs at least 99). All 80 trained people (400 facts: stored as subjects,
  so that a namesake's value is known), all 40 held-out (200) and 40 strangers (200).
- misattribution in mode generation (issue 42), on the same audits and null: every held-out person shares a first or
  last name with a trained one, and the model says a namesake's value for many of their facts — measured first, in
  the test, from the answers: the facts whose answers name a namesake's value in at least half the samples; flagged
  `misattributed` (p <= 0.01) on at least 40 % of their facts, each flagged namesake's value marked `namesake`; the
  strangers (names that share nothing with the trained) at the nominal rate.
- knowledge-free (answers hashed from the prompt over a vocabulary that names no one): flagged at its nominal rate,
  1 % inside the 95 % interval of the rate at p <= 0.01, over facts with one, two and three true values.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from app.settings import get_settings
from core.catalog import load_catalog
from core.measures.null import Rate
from core.names.fictitious import cohort
from tests.conftest import wait_for
from tests.e2e.test_groundtruth_misattribution import namesake_values, strangers

pytestmark = pytest.mark.slow

MANIFEST = Path(__file__).resolve().parents[2] / "workers" / "groundtruth" / "manifest.json"
GENERATION = {"samples": 10, "templates": 1, "temperature": 1.0, "max_tokens": 12, "form": "completion"}
OPTIONS = {"mode": "generation", "counterfactuals": 20, "generation": GENERATION}
MAX_P = 0.01


@pytest.fixture
def service(sqlite_env, api_factory, monkeypatch):
    monkeypatch.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", "100")
    monkeypatch.setenv("MEMAUDIT_MAX_ACTIVE_AUDITS_PER_KEY", "0")  # every subject queued at once (0: no quota)
    monkeypatch.setenv("MEMAUDIT_SUBMIT_RATE_PER_MINUTE", "0")
    get_settings.cache_clear()
    yield api_factory("auditor"), api_factory("admin")
    get_settings.cache_clear()


def submit(api, model: str, name: str, facts: list[dict]) -> str:
    body = {"kind": "subject", "model": model, "subject": {"name": name, "facts": facts}, "options": OPTIONS}
    r = api.post("/audits", json=body)
    assert r.status_code == 202, r.text
    return r.json()["id"]


def calibrated(api, admin, ids: list[str]) -> list[dict]:
    """Every fact of the audits, once their nulls are ready."""
    for aid in ids:
        assert wait_for(api, aid, timeout=1800)["status"] == "succeeded"
    nulls = {n["null_audit_id"] for aid in ids for n in api.get(f"/audits/{aid}/facts").json()["calibration"]["nulls"]}
    for null_id in nulls - {None}:
        assert wait_for(admin, null_id, timeout=1800)["status"] == "succeeded"
    return [f for aid in ids for f in api.get(f"/audits/{aid}/facts").json()["facts"]]


def interval(r: Rate) -> str:
    return f"{r.rate:.3f} ({r.k}/{r.n}, 95% CI {r.low:.3f}-{r.high:.3f})"


def test_generation_flags_trained_facts_and_not_held_out_ones(service):
    api, admin = service
    manifest = json.loads(MANIFEST.read_text())

    def people(group: list[dict]) -> list[str]:
        return [
            submit(
                api,
                "groundtruth-tiny",
                p["name"],
                [{"property": k, "value": v} for k, vs in p["facts"].items() for v in vs],
            )
            for p in group
        ]

    pids = sorted(manifest["properties"])
    trained_ids, held_ids = people(manifest["trained"]), people(manifest["held_out"])
    stranger_ids = people(strangers(manifest, pids))
    trained, held = calibrated(api, admin, trained_ids), calibrated(api, admin, held_ids)
    assert all(f["mode"] == "generation" and f["calibration"]["status"] == "ready" for f in trained + held)
    first = trained[0]["answers"]
    assert len(first["prompts"]) == 1 and len(first["prompts"][0]["samples"]) == GENERATION["samples"]
    assert sum(first["counts"].values()) == GENERATION["samples"] and first["cost"]["queries"] == 1
    summary = api.get(f"/audits/{trained_ids[0]}").json()["summary"]
    assert summary["generation"]["usage"]["samples"] == 5 * GENERATION["samples"], summary  # five properties
    assert summary["generation"]["usage"]["completion_tokens"] > 0

    recall = Rate.of(sum(f["calibration"]["memorized"] for f in trained), len(trained))
    fpr = Rate.of(sum(f["calibration"]["memorized"] for f in held), len(held))
    share = lambda fs: sum(f["share"] for f in fs) / len(fs)  # noqa: E731
    report = (
        f"generation (K={GENERATION['samples']}, baseline) p<=0.01 on groundtruth-tiny: recall {interval(recall)},"
        f" held-out FPR {interval(fpr)}; true share trained {share(trained):.3f}, held-out {share(held):.3f}"
    )
    print("\n" + report)
    assert recall.rate >= 0.9, report
    assert fpr.rate <= 0.02, report
    namesakes = [namesake_values(manifest, p["name"]) for p in manifest["held_out"] for _ in range(5)]
    misattributions(held, namesakes, calibrated(api, admin, stranger_ids))
    rows = [json.loads(line) for line in api.get("/rectification-set").text.splitlines()]
    flagged = sum(bool(f["misattribution"]["misattributed"]) for f in held)
    assert len(rows) > flagged and "_end" in rows[-1], rows[-1]  # every flagged fact, and the end marker
    assert all(r["mode"] == "generation" and r["prompts"] and r["example"] for r in rows[:-1]), rows[0]


def misattributions(held: list[dict], namesakes: list[dict[str, set[str]]], strange: list[dict]) -> None:
    """Issue 42 in mode generation (module docstring): ``namesakes`` per held-out fact, its trained namesakes'
    values per property."""
    facts = [(f, ns.get(f["property"], set())) for f, ns in zip(held, namesakes, strict=True)]
    for f, _ in facts + [(f, set()) for f in strange]:
        assert f["misattribution"] and not f["misattribution"]["uncalibrated"], f["misattribution"]
    said = lambda f, ns: sum(s["value"] in ns for p in f["answers"]["prompts"] for s in p["samples"])  # noqa: E731
    measured = [f for f, ns in facts if ns and said(f, ns) >= GENERATION["samples"] / 2]  # measured first
    flagged = [(f, ns) for f, ns in facts if f["misattribution"]["misattributed"]]
    flagged_namesake = [f for f, ns in flagged if f["misattribution"]["value"] in ns]
    alarms = Rate.of(sum(bool(f["misattribution"]["misattributed"]) for f in strange), len(strange))
    report = (
        f"misattribution (generation) held-out facts {len(facts)}: a namesake's value in >= half the answers"
        f" {len(measured)}; flagged at p <= 0.01 {len(flagged)}, a namesake's value {len(flagged_namesake)}, marked"
        f" namesake {sum(bool(f['misattribution']['namesake']) for f, _ in flagged)}; strangers {interval(alarms)}"
    )
    print("\n" + report)
    assert len(flagged_namesake) >= 0.4 * len(facts), report
    assert len(flagged_namesake) >= 0.6 * len(measured), report
    assert all(f["misattribution"]["namesake"] is True for f in flagged_namesake), report  # measured, not guessed
    assert alarms.rate <= MAX_P and alarms.low <= MAX_P, report  # 1,000 of them: benchmarks.misattribution_strangers


PIDS = ("P106", "P1412", "P27", "P569")  # occupations and languages with 1-3 values; a name-hinted item; a date
SUBJECTS = int(__import__("os").environ.get("GEN_SUBJECTS", "160"))  # x 4 properties: 640 facts


def roster(n: int) -> list[tuple[str, list[dict]]]:
    """Fictitious people (a seed the null does not use) with 1-3 values per occupation and language."""
    catalog, rng = load_catalog(), random.Random(5)
    out = []
    for person in cohort(n, PIDS, catalog, seed=4242):
        facts = []
        for pid in PIDS:
            m = 1 + person.index % 3 if pid in ("P106", "P1412") else 1
            values = list(dict.fromkeys([person.facts[pid], *rng.sample(catalog.get(pid).pool, 4)]))[:m]
            facts += [{"property": pid, "value": v} for v in values]
        out.append((person.name, facts))
    return out


def test_the_knowledge_free_generator_is_flagged_at_chance(service):
    api, admin = service
    ids = [submit(api, "knowledge-free", name, facts) for name, facts in roster(SUBJECTS)]
    facts = calibrated(api, admin, ids)
    assert all(f["calibration"]["status"] == "ready" for f in facts), [f["calibration"]["message"] for f in facts][:3]
    by_m: dict[int, list[float]] = {}
    for f in facts:
        by_m.setdefault(len(f["values"]), []).append(f["calibration"]["p_value"])
    overall = Rate.of(sum(p <= MAX_P for ps in by_m.values() for p in ps), len(facts))
    said = {m: f"{sum(p <= MAX_P for p in ps)}/{len(ps)}" for m, ps in sorted(by_m.items())}
    every = [p for ps in by_m.values() for p in ps]
    wider = {level: Rate.of(sum(p <= level for p in every), len(every)) for level in (0.05, 0.1, 0.5)}
    print(
        f"\nknowledge-free generation: {interval(overall)} flagged at p <= 0.01; by true values {said};"
        f" at p <= 0.05, 0.1, 0.5: {', '.join(interval(r) for r in wider.values())}"
    )
    wrong = Rate.of(sum(bool(f["misattribution"]["misattributed"]) for f in facts), len(facts))  # issue 42
    print(f"knowledge-free generation: misattributed at p <= 0.01 {interval(wrong)}")
    assert all(f["misattribution"]["p_value"] is not None for f in facts), [f["misattribution"] for f in facts][:3]
    assert wrong.rate <= MAX_P, interval(wrong)  # issue 42: at most the nominal rate
    assert all(r.low <= level <= r.high for level, r in wider.items()), wider  # uniform p-values, not just valid
    assert set(by_m) == {1, 2, 3}, said
    assert overall.low <= MAX_P <= overall.high, said
    assert all(Rate.of(sum(p <= MAX_P for p in ps), len(ps)).low <= MAX_P for ps in by_m.values()), said


def test_the_command_line_audits_by_generation(cli_env):
    from tests.support.cli import memaudit

    args = ("audit", "--model", "knowledge-free", "--mode", "generation", "--samples", "4", "--null-wait", "0")
    done = memaudit(cli_env, *args, "--name", "Ann Example", "--fact", "P106=chemist", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["audit"]["options"]["mode"] == "generation" and out["audit"]["options"]["generation"]["samples"] == 4
    assert out["audit"]["summary"]["generation"]["usage"]["samples"] == 4
    (fact,) = out["facts"]
    assert fact["mode"] == "generation" and len(fact["answers"]["prompts"][0]["samples"]) == 4


def test_a_batch_audits_every_person_by_generation(service):
    import time

    api, _ = service
    people = [{"name": name, "facts": facts[:1]} for name, facts in roster(2)]  # one occupation each: a small null
    created = api.post("/batches", json={"model": "knowledge-free", "options": OPTIONS, "people": people})
    assert created.status_code == 202, created.text
    deadline = time.monotonic() + 300
    while (batch := api.get(f"/batches/{created.json()['id']}").json())["status"] != "finished":
        assert time.monotonic() < deadline, batch
        time.sleep(0.5)
    assert batch["progress"]["succeeded"] == 2, batch
    listed = api.get("/audits", params={"kind": "subject"}).json()["items"]
    assert len(listed) == 2 and all(a["options"]["mode"] == "generation" for a in listed), listed
    facts = api.get(f"/audits/{listed[0]['id']}/facts").json()["facts"]
    assert {f["mode"] for f in facts} == {"generation"} and all(f["answers"]["prompts"] for f in facts)
