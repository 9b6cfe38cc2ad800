"""The default verdict (p <= 0.01 against the null) on the project's ground-truth model, through the service (HTTP
API -> embedded worker -> stored results -> null audit -> calibrated facts): trained people's facts are found
(recall >= 0.9), held-out people's are not (false-positive rate <= 0.02), and the null's estimate of each
policy's false-positive rate agrees with the held-out rate within its 95 % interval.

Held-out people appear nowhere in the model's training data, so every verdict on them is a false positive; the
null is made of other fictitious people (the hand-written roster) that the service computes itself. Baseline + 3
paraphrases and 20 counterfactuals (one paraphrase more than the service's default, core/defaults.py: a null of its
own, computed here, not the shipped one), 100 null facts per property (default 200; p <= 0.01 needs at least 99).
All 40 held-out people (200 facts), 10 trained (50).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.measures.null import Rate
from tests.conftest import wait_for

pytestmark = pytest.mark.slow

MANIFEST = Path(__file__).resolve().parents[2] / "workers" / "groundtruth" / "manifest.json"
OPTIONS = {"paraphrases": 3, "counterfactuals": 20}
TRAINED = 10
NULL_FACTS = "100"


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


def test_default_policy_finds_trained_facts_and_rejects_held_out_ones(sqlite_env, api_factory, monkeypatch):
    from app.settings import get_settings

    monkeypatch.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", NULL_FACTS)
    get_settings.cache_clear()
    manifest = json.loads(MANIFEST.read_text())
    api, admin = api_factory("auditor"), api_factory("admin")
    trained_ids = run(api, manifest["trained"][:TRAINED])
    held_ids = run(api, manifest["held_out"])
    pending = api.get(f"/audits/{held_ids[0]}/facts").json()["calibration"]["nulls"]
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
