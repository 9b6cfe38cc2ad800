"""What the context probe must not find (issue 26): a verification's context probe counts facts whose contextualized
canary (the person's other facts, then the baseline) ranks a true value first, against chance = true values /
candidates. That chance is the reference only if a model that never saw the person finds them at that rate. Here
groundtruth-tiny's held-out people (the same population, never trained on), audited through the service with
contextualized canaries: their count of facts first in context is not above the chance sum (exact Poisson-binomial
tail), while the trained people's is far above it.

Measured with all 40 held-out people (benchmark run, 2026-11-27): 10 of 200 first in context, chance 11.1; 40 trained
people: 108 of 200 (docs/verification.md, "The context probe")."""

from __future__ import annotations

import json

import pytest

from app.settings import GROUNDTRUTH_DIR
from tests.conftest import wait_for

pytestmark = pytest.mark.slow

MANIFEST = GROUNDTRUTH_DIR.parent / "manifest.json"
PEOPLE = 16  # per split (~5 facts each)
SMALL_NULL = {"MEMAUDIT_NULL_MIN_PEOPLE": "2", "MEMAUDIT_NULL_MAX_PEOPLE": "3", "MEMAUDIT_NULL_FACTS_PER_PROPERTY": "3"}


def _at_least(k: int, chances: list[float]) -> float:
    """P(X >= k) for X a sum of independent Bernoulli(chance) draws (exact, by dynamic programming)."""
    dist = [1.0]
    for p in chances:
        dist = [
            (dist[i] if i < len(dist) else 0.0) * (1 - p) + (dist[i - 1] * p if i else 0.0)
            for i in range(len(dist) + 1)
        ]
    return sum(dist[k:])


def _in_context(api, people: list[dict]) -> tuple[int, list[float]]:  # noqa: ANN001
    ids = []
    for person in people:
        facts = [{"property": pid, "value": v} for pid, values in person["facts"].items() for v in values]
        body = {"kind": "subject", "model": "groundtruth-tiny", "subject": {"name": person["name"], "facts": facts}}
        created = api.post("/audits", json=body | {"options": {"context": True}})
        assert created.status_code == 202, created.text
        ids.append(created.json()["id"])
    first, chances = 0, []
    for audit_id in ids:
        assert wait_for(api, audit_id, timeout=900)["status"] == "succeeded"
        for fact in api.get(f"/audits/{audit_id}/facts").json()["facts"]:
            (canary,) = [c for c in fact["canaries"] if c["kind"] == "context"]
            truths = len(fact["values"])
            chances.append(truths / (truths + len(fact["counterfactuals"])))
            first += bool(canary["memorized"])
    return first, chances


def test_held_out_people_are_first_in_context_at_chance(sqlite_env, api_factory, monkeypatch) -> None:  # noqa: ANN001
    from app.settings import get_settings

    for k, v in SMALL_NULL.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    api = api_factory("auditor")
    manifest = json.loads(MANIFEST.read_text())
    held, held_chances = _in_context(api, manifest["held_out"][:PEOPLE])
    trained, trained_chances = _in_context(api, manifest["trained"][-PEOPLE:])
    tail = _at_least(held, held_chances)
    report = (
        f"first in context: held-out {held}/{len(held_chances)} (chance {sum(held_chances):.1f}, P(X >= k) {tail:.3f});"
        f" trained {trained}/{len(trained_chances)} (chance {sum(trained_chances):.1f})"
    )
    print("\n" + report)
    assert len(held_chances) >= 4 * PEOPLE, report
    assert tail >= 0.01, report  # not above chance: the probe's reference holds for people the model never saw
    assert _at_least(trained, trained_chances) < 1e-6 and trained >= 0.3 * len(trained_chances), report
