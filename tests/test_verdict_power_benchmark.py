"""The verdict-power benchmark's cohorts (no model: the people and facts it would score). Extra known or unknown
cohorts come after the null cohort, so every earlier person keeps its index — the seed of its counterfactuals — and
the NLLs cached for it; the hand-made cohorts are well-formed: five properties each, values the catalog knows, and no
name in two cohorts."""

import json
from pathlib import Path

from benchmarks import verdict_power as vp
from core.catalog import load_catalog

COHORTS = json.loads((Path(vp.REPO) / "benchmarks" / "calibration_cohorts.json").read_text())


def test_extra_unknown_cohorts_come_after_the_null_and_keep_every_earlier_draw():
    base = vp.build_facts("smollm2-135m", 20, 0, ("famous",))
    more = vp.build_facts("smollm2-135m", 20, 0, ("famous",), None, ("fictitious", "fictitious_more"))
    assert more[: len(base)] == base  # the same people, facts and counterfactual draws, in the same order
    extra = more[len(base) :]
    assert {f.group for f in extra} == {"unknown"} and {f.cohort for f in extra} == {"fictitious_more"}
    assert len({f.person for f in extra}) == len(COHORTS["fictitious_more"]) == 100
    without = vp.build_facts("smollm2-135m", 20, 0, ("famous",), None, ("fictitious_more",))
    assert not any(f.cohort == "fictitious" for f in without)  # the first cohort can be left out too


def test_hand_made_cohorts_are_well_formed():
    catalog = load_catalog()
    keys = ("famous", "fictitious", "famous_more", "fictitious_more", "fictitious_other")
    names = [p["name"] for key in keys for p in COHORTS[key]]
    assert len(names) == len(set(names)) == 24 + 22 + 50 + 100 + 142
    for p in COHORTS["fictitious_more"] + COHORTS["fictitious_other"]:
        facts = {f["property"]: f["value"] for f in p["facts"]}
        assert sorted(facts) == sorted(vp.PIDS) and facts["P21"] in ("male", "female"), p["name"]
        for pid in ("P106", "P27", "P19", "P1412"):  # in-pool values: judged against the in-pool null
            prop = catalog.get(pid)
            assert prop.value_key(prop.normalize(facts[pid])) in {prop.value_key(v) for v in prop.pool}, p["name"]
