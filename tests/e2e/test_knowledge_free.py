"""The negative control through the service: the registered model `knowledge-free` (NLLs from a seeded hash of the
sentence) is audited like any model. Its facts — one, two and three true values; items, dates, quantities, strings;
in and out of the pool (out-of-pool values: real towns and occupations no reservoir of the null lists) — are judged
by a null of their own shape, and the default verdict (p <= 0.01) flags them at chance. Also: a fact outside a pool
whose kind has no out-of-pool reservoir (a pseudonym) and one with four values say `uncalibrated`, with the reason."""

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
OPTIONS = {"paraphrases": 2, "counterfactuals": 20, "lookalikes": "same_origin"}
SUBJECTS = 40


@pytest.fixture
def nulls_of_300(sqlite_env, monkeypatch):
    monkeypatch.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", "300")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def roster(n: int) -> list[dict]:
    """Fictitious people (a seed the null does not use) with 1-3 values per fact, from the catalog's pools; every
    other person's birthplace is a town outside the pool, and every fourth person's first occupation is outside it."""
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
    calibrations = []
    for audit_id, person in zip(ids, people, strict=True):
        page = api.get(f"/audits/{audit_id}/facts").json()
        for fact in page["facts"]:
            cal = fact["calibration"]
            if cal["status"] == "pending":  # the null of this configuration is still running
                null = cal["null_audit_id"]
                assert wait_for(api_factory("admin"), null, timeout=900)["status"] == "succeeded"
                cal = api.get(f"/audits/{audit_id}/facts").json()["facts"][page["facts"].index(fact)]["calibration"]
            assert cal["status"] == "ready", cal
            values = [f["value"] for f in person["facts"] if f["property"] == fact["property"]]
            in_pool = load_catalog().get(fact["property"]).holds(values)
            assert cal["null_shape"]["n_values"] == len(values) and cal["null_shape"]["in_pool"] == in_pool, cal
            calibrations.append((fact["property"], len(values), cal))
    by_shape = {m: [c for _, mm, c in calibrations if mm == m] for m in (1, 2, 3)}
    assert all(by_shape.values()), {m: len(v) for m, v in by_shape.items()}
    outside = [c for _, _, c in calibrations if not c["null_shape"]["in_pool"]]
    assert len(outside) >= SUBJECTS // 2 + SUBJECTS // 4, len(outside)  # the towns, the trades
    flagged = sum(c["p_value"] <= 0.01 for _, _, c in calibrations)
    rate = Rate.of(flagged, len(calibrations))
    detail = {m: sum(c["p_value"] <= 0.01 for c in v) for m, v in by_shape.items()}
    assert rate.low <= 0.01 and flagged <= 4, f"{flagged}/{len(calibrations)} flagged at p <= 0.01 ({detail} by m)"

    odd_facts = {f["property"]: f["calibration"] for f in api.get(f"/audits/{odd}/facts").json()["facts"]}
    assert odd_facts["P742"]["status"] == "uncalibrated" and "pool" in odd_facts["P742"]["message"]
    assert odd_facts["P106"]["status"] == "uncalibrated" and "more than 3" in odd_facts["P106"]["message"]
    assert odd_facts["P742"]["p_value"] is None and odd_facts["P742"]["memorized"] is None
