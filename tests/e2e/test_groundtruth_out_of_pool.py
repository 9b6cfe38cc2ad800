"""Out-of-pool true values get a valid verdict (issue 22): the project's ground-truth model cannot know its held-out
people, so every held-out fact it flags is a false positive. Each held-out person is given true values outside the
catalog's pools — real ones, none drawn by the null's own reservoir generator: the famous cohort's out-of-pool
birthplaces (benchmarks/calibration_cohorts.json), former states, rare occupations and historical languages — and
audited through the service (HTTP API -> embedded worker -> null audit -> calibrated facts). Before out-of-pool
null facts these facts said `uncalibrated`; now each is judged against null facts whose truth is outside the pool
too (null_shape.in_pool false), and the default verdict (p <= 0.01) flags them at the null's rate.

groundtruth-tiny's trained people have only pool values (it was trained on them), so it has no out-of-pool fact to
find: recall on out-of-pool values is measured on smollm2-135m's famous cohort (benchmarks/verdict_power.py).
40 held-out people x 4 properties at the service's default configuration (baseline + 2 paraphrases, 20
counterfactuals), so the null shipped for groundtruth-tiny judges them (app/nulls/shipped/, 200 null facts per shape,
out-of-pool shapes included; tests/e2e/test_shipped_null.py rebuilds it byte for byte): no null is computed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import defaults
from core.catalog import load_catalog
from core.measures.null import Rate
from tests.conftest import wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = {"paraphrases": defaults.PARAPHRASES, "counterfactuals": defaults.COUNTERFACTUALS}
STATES = ("Duchy of Brunswick", "Kingdom of Hanover", "Republic of Genoa", "Kingdom of Navarre", "Duchy of Savoy")
OCCUPATIONS = ("lighthouse keeper", "glassblower", "luthier", "falconer", "chimney sweep", "bookbinder", "cooper")
LANGUAGES = ("Old English", "Low German", "Middle High German", "Old Norse", "Classical Chinese", "Scots", "Ladino")


def out_of_pool_facts() -> dict[str, list[str]]:
    """Real values outside the pools, per property (checked here: a value that entered a pool would test nothing)."""
    catalog = load_catalog()
    cohorts = json.loads((ROOT / "benchmarks" / "calibration_cohorts.json").read_text())
    births = [f["value"] for p in cohorts["famous"] for f in p["facts"] if f["property"] == "P19"]
    values = {"P19": births, "P27": list(STATES), "P106": list(OCCUPATIONS), "P1412": list(LANGUAGES)}
    out = {pid: [v for v in vs if not catalog.get(pid).holds([v])] for pid, vs in values.items()}
    assert all(len(vs) >= 5 for vs in out.values()), out
    return out


def test_held_out_out_of_pool_values_are_flagged_at_the_null_rate(sqlite_env, api_factory):
    manifest = json.loads((ROOT / "workers" / "groundtruth" / "manifest.json").read_text())
    values = out_of_pool_facts()
    api, admin = api_factory("auditor"), api_factory("admin")
    ids = []
    for i, person in enumerate(manifest["held_out"]):
        facts = [{"property": pid, "value": vs[i % len(vs)]} for pid, vs in values.items()]
        body = {"kind": "subject", "model": "groundtruth-tiny", "options": OPTIONS}
        r = api.post("/audits", json=body | {"subject": {"name": person["name"], "facts": facts}})
        assert r.status_code == 202, r.text
        ids.append(r.json()["id"])
    for audit_id in ids:
        assert wait_for(api, audit_id, timeout=3600)["status"] == "succeeded"
    nulls = api.get(f"/audits/{ids[0]}/facts").json()["calibration"]["nulls"]
    assert {n["source"] for n in nulls} == {"shipped"}, nulls  # the default configuration's null, not computed
    for null_id in {n["null_audit_id"] for n in nulls}:
        assert wait_for(admin, null_id, timeout=3600)["status"] == "succeeded"
    facts = [f for aid in ids for f in api.get(f"/audits/{aid}/facts").json()["facts"]]
    assert len(facts) == 4 * len(ids)
    for f in facts:
        cal = f["calibration"]
        assert cal["status"] == "ready", cal  # was `uncalibrated` before out-of-pool null facts
        assert cal["null_shape"]["in_pool"] is False, cal
        # one per null person and shape (m = 2 where a near-duplicate counterfactual was merged into the truth), less
        # the few whose out-of-pool truth absorbed one: p <= 0.01 is reachable (with the fitted tail)
        assert cal["null_shape"]["null_facts"] >= 190, cal
    flagged = [f for f in facts if f["calibration"]["memorized"]]
    rate = Rate.of(len(flagged), len(facts))
    by_pid = {pid: sum(f["property"] == pid for f in flagged) for pid in values}
    lenient = Rate.of(sum(f["lenient"] for f in facts), len(facts))
    print(
        f"\ngroundtruth-tiny, held-out out-of-pool values: {rate.k}/{rate.n} flagged at p <= 0.01 "
        f"(95% CI {rate.low:.3f}-{rate.high:.3f}; by property {by_pid}); ranked first under some template "
        f"{lenient.k}/{lenient.n}"
    )
    # at the null's rate: 1 % is inside the interval, and no more than chance allows (P(X >= 6) = 0.006 at 1 %)
    assert rate.low <= 0.01 and rate.k <= 5, by_pid
