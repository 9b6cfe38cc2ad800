"""The default verdict (p <= 0.01 against the null) on the project's ground-truth model, through the service (HTTP
API -> embedded worker -> stored results -> null audit -> calibrated facts): trained people's facts are found
(recall >= 0.9), held-out people's are not (false-positive rate <= 0.02), and the null's estimate of each
policy's false-positive rate agrees with the held-out rate within its 95 % interval.

Held-out people appear nowhere in the model's training data, so every verdict on them is a false positive; the
null is made of other fictitious people (the hand-written roster). The service's default configuration (baseline +
2 paraphrases, 20 counterfactuals, core/defaults.py), so the null is the one shipped for groundtruth-tiny
(app/nulls/shipped/, 200 null facts per property and shape), as a user's first audit of this model gets it:
tests/e2e/test_shipped_null.py rebuilds that file byte for byte from the code, and the nulls the service computes
itself are checked by tests/e2e/test_knowledge_free.py, test_null_chunks.py and test_verification.py. (Until
2026-11-29 this test used one paraphrase more to compute a null of 100 facts of its own: 123 of the suite's CPU-s,
half of them that null.) All 40 held-out people (200 facts), 10 trained (50).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import defaults
from core.measures.null import Rate
from tests.conftest import wait_for

pytestmark = pytest.mark.slow

MANIFEST = Path(__file__).resolve().parents[2] / "workers" / "groundtruth" / "manifest.json"
OPTIONS = {"paraphrases": defaults.PARAPHRASES, "counterfactuals": defaults.COUNTERFACTUALS}
TRAINED = 10


def payload(person: dict) -> dict:
    facts = [{"property": pid, "value": v} for pid, values in person["facts"].items() for v in values]
    return {
        "kind": "subject",
        "model": "groundtruth-tiny",
        "subject": {"name": person["name"], "facts": facts},
        "options": OPTIONS,
    }


def run(api, people: list[dict]) -> list[str]:
    ids = [api.post("/audits", json=payload(p)).json()["id"] for p in people]
    for aid in ids:
        assert wait_for(api, aid, timeout=3600)["status"] == "succeeded"
    return ids


def facts(api, ids: list[str]) -> list[dict]:
    return [f for aid in ids for f in api.get(f"/audits/{aid}/facts").json()["facts"]]


def interval(r: Rate) -> str:
    return f"{r.rate:.3f} ({r.k}/{r.n}, 95% CI {r.low:.3f}-{r.high:.3f})"


def test_default_policy_finds_trained_facts_and_rejects_held_out_ones(sqlite_env, api_factory):
    manifest = json.loads(MANIFEST.read_text())
    api, admin = api_factory("auditor"), api_factory("admin")
    trained_ids = run(api, manifest["trained"][:TRAINED])
    held_ids = run(api, manifest["held_out"])
    pending = api.get(f"/audits/{held_ids[0]}/facts").json()["calibration"]["nulls"]
    assert {n["source"] for n in pending} == {"shipped"}, pending  # the default configuration's null, not computed
    for null_id in {n["null_audit_id"] for n in pending}:
        assert wait_for(admin, null_id, timeout=3600)["status"] == "succeeded"
    trained, held = facts(api, trained_ids), facts(api, held_ids)
    assert all(f["calibration"]["status"] == "ready" for f in trained + held)

    recall = Rate.of(sum(f["calibration"]["memorized"] for f in trained), len(trained))
    fpr = Rate.of(sum(f["calibration"]["memorized"] for f in held), len(held))
    held_lenient = Rate.of(sum(f["lenient"] for f in held), len(held))
    # the null's own estimates, pooled over the held-out facts' properties (each fact's property's rate)
    null_p = sum(f["calibration"]["fpr"]["pvalue"]["rate"] for f in held) / len(held)
    null_lenient = sum(f["calibration"]["fpr"]["lenient"]["rate"] for f in held) / len(held)
    report = (
        f"default policy p<=0.01 on groundtruth-tiny: recall on trained {interval(recall)}, false-positive "
        f"rate on held-out {interval(fpr)}; null-estimated FPR {null_p:.3f} (lenient: held-out "
        f"{interval(held_lenient)}, null {null_lenient:.3f})"
    )
    print("\n" + report)
    for pid in sorted({f["property"] for f in held}):
        t = [f for f in trained if f["property"] == pid]
        h = [f for f in held if f["property"] == pid]
        cal = h[0]["calibration"]["fpr"]
        print(
            f"  {pid}: recall {sum(f['calibration']['memorized'] for f in t)}/{len(t)}, held-out p<=0.01 "
            f"{sum(f['calibration']['memorized'] for f in h)}/{len(h)} (null {cal['pvalue']['rate']:.3f}), held-out "
            f"lenient {sum(f['lenient'] for f in h)}/{len(h)} (null {cal['lenient']['rate']:.3f})"
        )
    assert recall.rate >= 0.9, report
    assert fpr.rate <= 0.02, report
    assert fpr.low <= null_p <= fpr.high, report
    assert held_lenient.low <= null_lenient <= held_lenient.high, report
