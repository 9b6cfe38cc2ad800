"""Misattribution verdicts on the project's ground-truth model (issue 42, scoring mode), through the service (HTTP
API -> embedded worker -> stored results -> the shipped null -> GET /audits/{id}/facts).

groundtruth-tiny never saw its 40 held-out people, but every one of them shares a first or a last name with a
trained person (the roster was drawn from few name parts). A model that ties values to name parts prefers a
namesake's value: that is a misattribution, and the statistic must find it. People whose names share nothing with
the trained (a cohort of the fictitious-name generator, a seed no null uses) give the model nothing to confuse:
every flag on them is a false alarm. Measured first, in the test: how many held-out facts have a namesake's value
among their drawn candidates (a scoring audit ranks 20 counterfactuals drawn from the pool: only a drawn value can
be preferred), and how often the value the model prefers most is a namesake's; then the flags at p <= 0.01.

The CLI's default configuration (baseline + 2 paraphrases, 20 counterfactuals), so the shipped null judges it
(app/nulls/shipped/groundtruth-tiny.null.json.gz, 775 fictitious people per property): no null is computed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.settings import get_settings
from benchmarks.misattribution_strangers import strangers as benchmark_strangers
from core import defaults
from core.measures.null import Rate
from tests.conftest import wait_for

pytestmark = pytest.mark.slow

MANIFEST = Path(__file__).resolve().parents[2] / "workers" / "groundtruth" / "manifest.json"
OPTIONS = {"paraphrases": defaults.PARAPHRASES, "counterfactuals": defaults.COUNTERFACTUALS, "context": False}
STRANGERS = 40  # people whose names share nothing with the trained: x 5 properties = 200 facts


def namesake_values(manifest: dict, name: str) -> dict[str, set[str]]:
    """Per property, the values of the trained people who share a first or last name with ``name``."""
    first, last = name.split()[0], name.split()[-1]
    out: dict[str, set[str]] = {}
    for t in manifest["trained"]:
        if t["name"].split()[0] == first or t["name"].split()[-1] == last:
            for pid, values in t["facts"].items():
                out.setdefault(pid, set()).update(values)
    return out


def strangers(manifest: dict, pids: list[str]) -> list[dict]:
    """Fictitious people whose first and last names are no trained or held-out person's: the first STRANGERS of the
    cohort benchmarks.misattribution_strangers measures on 1,000 facts, their facts as {property: [value]}."""
    assert pids == sorted(manifest["properties"]), pids  # the benchmark's properties
    people = benchmark_strangers(manifest, STRANGERS)
    return [{"name": p["name"], "facts": {f["property"]: [f["value"]] for f in p["facts"]}} for p in people]


def audit(api, people: list[dict]) -> list[list[dict]]:
    """Each person's facts with their candidates, once audited and judged."""
    ids = []
    for p in people:
        facts = [{"property": pid, "value": v} for pid, values in p["facts"].items() for v in values]
        body = {"kind": "subject", "model": "groundtruth-tiny", "subject": {"name": p["name"], "facts": facts}}
        r = api.post("/audits", json=body | {"options": OPTIONS})
        assert r.status_code == 202, r.text
        ids.append(r.json()["id"])
    for aid in ids:
        assert wait_for(api, aid, timeout=3600)["status"] == "succeeded"
    return [api.get(f"/audits/{aid}/facts", params={"detail": "candidates"}).json()["facts"] for aid in ids]


def test_namesakes_values_are_flagged_and_strangers_are_not(sqlite_env, api_factory, monkeypatch):
    # 80 submissions on one key: the strangers' 40 follow the held-out people's as soon as those are done, within
    # the minute once scoring got faster (a 429 at the 61st); the submission rate is not what this test measures
    monkeypatch.setenv("MEMAUDIT_SUBMIT_RATE_PER_MINUTE", "0")
    get_settings.cache_clear()
    manifest = json.loads(MANIFEST.read_text())
    api = api_factory("auditor")
    held = manifest["held_out"]
    pids = sorted(manifest["properties"])
    held_facts, stranger_facts = audit(api, held), audit(api, strangers(manifest, pids))
    with_namesake = [namesake_values(manifest, p["name"]) for p in held]
    assert all(with_namesake), "every held-out person shares a name part with a trained one"
    facts = [
        (f, ns.get(f["property"], set())) for page, ns in zip(held_facts, with_namesake, strict=True) for f in page
    ]
    for f, _ in facts + [(f, set()) for page in stranger_facts for f in page]:
        assert f["calibration"]["status"] == "ready" and not f["misattribution"]["uncalibrated"], f["misattribution"]
    drawn = [(f, ns) for f, ns in facts if ns & set(f["counterfactuals"]) - set(f["values"])]
    # measured first: the false value the model prefers most is a namesake's (whatever its p-value)
    preferred = [(f, ns) for f, ns in drawn if f["misattribution"]["value"] in ns]
    flagged = [(f, ns) for f, ns in facts if f["misattribution"]["misattributed"]]
    flagged_namesake = [f for f, ns in flagged if f["misattribution"]["value"] in ns]
    false_alarms = Rate.of(sum(f["misattribution"]["misattributed"] for p in stranger_facts for f in p), STRANGERS * 5)
    report = (
        f"held-out facts {len(facts)}: a namesake's value drawn among the candidates {len(drawn)}, preferred most"
        f" {len(preferred)}; flagged at p <= 0.01 {len(flagged)}, a namesake's value {len(flagged_namesake)};"
        f" strangers flagged {false_alarms.k}/{false_alarms.n} (95% CI {false_alarms.low:.4f}-{false_alarms.high:.4f})"
    )
    print("\n" + report)
    assert len(flagged) >= len(preferred), report  # flagged on at least the share measured beforehand
    assert len(flagged_namesake) >= 0.4 * len(facts), report  # and a namesake's value on at least 40 % of facts
    # a preferred namesake's value is mostly found (measured 87 of 113; occupation's null is 20 people's own values,
    # a pseudo-truth null, so it flags no occupation at p <= 0.01)
    assert len(flagged_namesake) >= 0.6 * len(preferred), report
    assert false_alarms.rate <= 0.02 and false_alarms.low <= 0.01, report  # strangers: at the nominal rate
