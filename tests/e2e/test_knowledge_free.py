"""The negative control through the service: the registered model `knowledge-free` (NLLs from a seeded hash of the
sentence) is audited like any model. Its facts — one, two and three true values; items, dates, quantities, strings;
in and out of the pool (out-of-pool values: real towns, occupations and languages no reservoir of the null lists),
and facts with values both in and out of the pool (judged on their pool values alone too) — are judged by a null of
their own shape, and the default verdict (p <= 0.01) flags them at its nominal rate: 1 % is inside the rate's 95 %
interval over 2,100 facts (the fitted tail fitted to the null's top quarter flagged 0.35 %: valid, but power thrown
away), and no shape is flagged above its interval at p <= 0.01 or p <= 0.001. Also: a fact outside a pool whose
kind has no out-of-pool reservoir (a pseudonym) and one with four values say `uncalibrated`, with the reason."""

from __future__ import annotations

import random

import pytest

from app.settings import get_settings
from core.catalog import load_catalog
from core.measures.null import Rate
from core.names.fictitious import cohort
from core.names.lookalikes import READER
from tests.conftest import wait_for

PIDS = ("P106", "P27", "P569", "P2048", "P742", "P1412", "P19")  # item (pseudo / name-hinted), time, quantity, string
TOWNS = ("Kleinwelsbach", "Ober-Ramstadt", "Villanueva de la Serena", "Castelnaudary", "Bad Aussee", "Tomaszów")
TRADES = ("lighthouse keeper", "glassblower", "luthier", "falconer", "chimney sweep", "bookbinder", "cooper")
TONGUES = ("Old English", "Low German", "Middle High German", "Old Norse", "Classical Chinese", "Scots", "Ladino")
OPTIONS = {"paraphrases": 2, "counterfactuals": 20, "lookalikes": "same_origin"}
SUBJECTS = 300  # x 7 properties: 2,100 facts, enough to tell 1 % from the 0.35 % of a conservative tail


@pytest.fixture
def nulls_of_300(sqlite_env, monkeypatch):
    monkeypatch.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", "300")
    monkeypatch.setenv("MEMAUDIT_MAX_ACTIVE_AUDITS_PER_KEY", "0")  # every subject queued at once (0: no quota)
    monkeypatch.setenv("MEMAUDIT_SUBMIT_RATE_PER_MINUTE", "0")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def roster(n: int) -> list[dict]:
    """Fictitious people (a seed the null does not use) with 1-3 values per fact, from the catalog's pools; every
    other person's birthplace is a town outside the pool, and every fourth person's first occupation (another fourth's
    first language) is outside it, so that some facts hold values in and out of the pool."""
    catalog, rng = load_catalog(), random.Random(11)
    people = []
    for person in cohort(n, PIDS, catalog, seed=977):
        facts = []
        for pid in PIDS:
            m = 1 + person.index % 3 if pid in ("P106", "P1412") else 1
            own = person.facts[pid]
            if pid == "P19" and person.index % 2:
                own = TOWNS[person.index % len(TOWNS)]
            if pid == "P106" and person.index % 4 == 3:
                own = TRADES[person.index % len(TRADES)]
            if pid == "P1412" and person.index % 4 == 1:
                own = TONGUES[person.index % len(TONGUES)]
            values = [own, *rng.sample(catalog.get(pid).pool, 4)]
            facts += [{"property": pid, "value": v} for v in list(dict.fromkeys(values))[:m]]
        people.append({"name": person.name, "facts": facts})
    return people


def submit(api, subject: dict) -> str:
    r = api.post("/audits", json={"kind": "subject", "model": "knowledge-free", "options": OPTIONS, "subject": subject})
    assert r.status_code == 202, r.text
    return r.json()["id"]


@pytest.mark.slow
def test_the_knowledge_free_model_is_flagged_at_chance_for_every_shape(nulls_of_300, api_factory):
    api = api_factory("auditor")
    people = roster(SUBJECTS)
    ids = [submit(api, s) for s in people]
    odd = submit(  # a pseudonym outside the pool (no reservoir for names), and an occupation with four values
        api,
        {
            "name": "Ilse Brandauer",
            "facts": [{"property": "P742", "value": "Kleinwelsbacher Nachtigall"}]
            + [{"property": "P106", "value": v} for v in ("painter", "chemist", "lawyer", "physicist")],
        },
    )
    for audit_id in [*ids, odd]:
        done = wait_for(api, audit_id, timeout=900)
        assert done["status"] == "succeeded"
        # the name-origin reader that drew its same-origin look-alikes is recorded (a null's key holds it)
        assert done["summary"]["lookalike_reader"] == READER, done["summary"]
    calibrations, misattributions = [], []
    for audit_id, person in zip(ids, people, strict=True):
        page = api.get(f"/audits/{audit_id}/facts").json()
        for fact in page["facts"]:
            cal = fact["calibration"]
            if cal["status"] == "pending":  # the null of this configuration is still running
                null = cal["null_audit_id"]
                assert wait_for(api_factory("admin"), null, timeout=900)["status"] == "succeeded"
                fact = api.get(f"/audits/{audit_id}/facts").json()["facts"][page["facts"].index(fact)]
                cal = fact["calibration"]
            assert cal["status"] == "ready", cal
            misattributions.append((fact["misattribution"] or {"uncalibrated": True}) | {"property": fact["property"]})
            values = [f["value"] for f in person["facts"] if f["property"] == fact["property"]]
            in_pool = load_catalog().get(fact["property"]).holds(values)
            shape = (cal["null_shape"]["n_values"], cal["null_shape"]["in_pool"])
            if cal["null_shape"]["judgments"] == 2:  # values in and out of the pool: judged on its pool values too
                assert not in_pool and shape[0] <= len(values) and shape in {(len(values), False), (shape[0], True)}
            else:
                assert shape == (len(values), in_pool), cal
            calibrations.append((fact["property"], len(values), cal))
    by_shape: dict[tuple[int, str], list[dict]] = {}
    for _, m, cal in calibrations:
        where = "mixed" if cal["null_shape"]["judgments"] == 2 else "in" if cal["null_shape"]["in_pool"] else "out"
        by_shape.setdefault((m, where), []).append(cal)
    assert {(1, "in"), (2, "in"), (3, "in"), (1, "out"), (2, "mixed"), (3, "mixed")} <= set(by_shape), set(by_shape)
    assert len(by_shape[2, "mixed"]) + len(by_shape[3, "mixed"]) >= 60, {k: len(v) for k, v in by_shape.items()}
    rates = {
        level: {shape: Rate.of(sum(c["p_value"] <= level for c in v), len(v)) for shape, v in by_shape.items()}
        for level in (0.01, 0.001)
    }
    said = {level: {f"{m}{w}": f"{r.k}/{r.n}" for (m, w), r in shapes.items()} for level, shapes in rates.items()}
    overall = Rate.of(sum(c["p_value"] <= 0.01 for _, _, c in calibrations), len(calibrations))
    print(
        f"\nknowledge-free: {overall.k}/{overall.n} flagged at p <= 0.01 ({overall.low:.4f}-{overall.high:.4f}); {said}"
    )
    assert overall.n >= 2000 and overall.low <= 0.01 <= overall.high, said  # nominal: neither above nor below
    for level, shapes in rates.items():
        assert all(r.low <= level for r in shapes.values()), (level, said)  # valid for every shape
    assert Rate.of(sum(r.k for r in rates[0.001].values()), overall.n).low <= 0.001, said

    misattribution_at_chance(misattributions)

    odd_facts = {f["property"]: f["calibration"] for f in api.get(f"/audits/{odd}/facts").json()["facts"]}
    assert odd_facts["P742"]["status"] == "uncalibrated" and "pool" in odd_facts["P742"]["message"]
    assert odd_facts["P106"]["status"] == "uncalibrated" and "more than 3" in odd_facts["P106"]["message"]
    assert odd_facts["P742"]["p_value"] is None and odd_facts["P742"]["memorized"] is None


def misattribution_at_chance(blocks: list[dict | None]) -> None:
    """The misattribution verdict (issue 42) on the same facts: a model that knows nothing prefers no false value
    beyond chance, so p <= 0.01 flags them at most at the nominal rate (every fact judged)."""
    assert all(b is not None and not b["uncalibrated"] for b in blocks), [
        b for b in blocks if not b or b["uncalibrated"]
    ]
    flagged = Rate.of(sum(b["misattributed"] for b in blocks), len(blocks))
    said = f"{flagged.k}/{flagged.n} flagged at p <= 0.01 ({flagged.low:.4f}-{flagged.high:.4f})"
    by_property: dict[str, list[int]] = {}
    for b in blocks:
        by_property.setdefault(b["property"], []).append(b["misattributed"])
    print(f"knowledge-free misattribution: {said}; { ({k: f'{sum(v)}/{len(v)}' for k, v in by_property.items()}) }")
    assert flagged.n >= 2000 and flagged.rate <= 0.01 and flagged.low <= 0.01, said  # at most the nominal rate
