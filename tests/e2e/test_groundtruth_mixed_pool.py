"""A fact with values in and out of the pool (issue 40): one extra out-of-pool true value must not hide a pool value
the model knows. groundtruth-tiny was trained on its trained people's pool values; each of the first five is audited
with their occupation and birthplace plus one real value outside the pool (a rare trade, a small town), through the
service at the defaults (HTTP API -> embedded worker -> the shipped null). Before, such a fact was judged only as a
whole against out-of-pool null facts, whose tail is far higher (p <= 0.01 moved from a statistic of 2.4-3.3 to
18.8-19.0): 0 of 40 were found. Now its pool values are also judged alone against in-pool null facts, and p is the
weighted Bonferroni of the two judgments (core.measures.null.either_p_value): measured on 20 trained people, 20/20
occupations and 20/20 birthplaces found (as alone), 0/40 held out. Held-out people audited alike are flagged at the
null's rate only (mixed facts of every datatype are in tests/e2e/test_knowledge_free.py's validity check too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.catalog import load_catalog
from tests.conftest import wait_for

pytestmark = pytest.mark.slow

MANIFEST = Path(__file__).resolve().parents[2] / "workers" / "groundtruth" / "manifest.json"
OPTIONS = {"paraphrases": 2, "counterfactuals": 20, "lookalikes": "same_origin"}  # the shipped null's configuration
EXTRA = {
    "P106": ("lighthouse keeper", "glassblower", "luthier", "falconer", "bookbinder"),
    "P19": ("Kleinwelsbach", "Ober-Ramstadt", "Castelnaudary", "Bad Aussee", "Tomaszów"),
}
PEOPLE = 5


def audit(api, person: dict, i: int) -> str:
    facts = [{"property": pid, "value": v} for pid in EXTRA for v in person["facts"][pid]]
    facts += [{"property": pid, "value": values[i % len(values)]} for pid, values in EXTRA.items()]
    body = {"kind": "subject", "model": "groundtruth-tiny", "options": OPTIONS}
    r = api.post("/audits", json=body | {"subject": {"name": person["name"], "facts": facts}})
    assert r.status_code == 202, r.text
    return r.json()["id"]


def verdicts(api, people: list[dict]) -> list[dict]:
    ids = [audit(api, p, i) for i, p in enumerate(people)]
    for aid in ids:
        assert wait_for(api, aid, timeout=1800)["status"] == "succeeded"
    return [f for aid in ids for f in api.get(f"/audits/{aid}/facts").json()["facts"]]


def test_a_trained_pool_value_with_an_extra_out_of_pool_value_is_still_found(sqlite_env, api_factory):
    catalog = load_catalog()
    assert not any(catalog.get(pid).holds([v]) for pid, vs in EXTRA.items() for v in vs), "an extra entered a pool"
    manifest = json.loads(MANIFEST.read_text())
    api = api_factory("auditor")
    trained = verdicts(api, manifest["trained"][:PEOPLE])
    held_out = verdicts(api, manifest["held_out"][:PEOPLE])
    for f in trained + held_out:
        cal = f["calibration"]
        assert cal["status"] == "ready", cal
        assert cal["null_shape"]["judgments"] == 2, cal  # the pool values alone, and the whole fact
    found = {pid: sum(f["calibration"]["memorized"] for f in trained if f["property"] == pid) for pid in EXTRA}
    false = {pid: sum(f["calibration"]["memorized"] for f in held_out if f["property"] == pid) for pid in EXTRA}
    p = {f["property"] + str(i): round(f["calibration"]["p_value"], 6) for i, f in enumerate(trained)}
    print(f"\ngroundtruth-tiny, pool value + one out-of-pool value: trained found {found}, held out {false}; {p}")
    assert found["P106"] >= 4 and found["P19"] >= 4, (found, p)  # was 0 and 0
    assert sum(false.values()) <= 1, false
