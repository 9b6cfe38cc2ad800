"""WikiMem's rates on the project's ground-truth model, through the real service path (HTTP API → embedded
worker → stored results) with every paraphrase and 100 counterfactuals: trained people's facts are memorized
(lenient >= 0.8), held-out people's are not (strict <= 0.02, lenient <= 0.15: with 100 counterfactuals and
11 templates, chance alone makes some lenient hits).

Measured through this path with 5 people per split (25 + 25 facts): trained lenient 1.000, trained strict 0.040,
held-out lenient 0.080, held-out strict 0.000 (21 min on the shared 2-core machine, so the suite runs 3 per split;
the model's own evaluator measured 400 trained / 200 held-out facts: lenient 1.00 / 0.11, held-out strict 0.00)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import wait_for

pytestmark = pytest.mark.slow

MANIFEST = Path(__file__).resolve().parents[2] / "workers" / "groundtruth" / "manifest.json"
PER_SPLIT = 3  # people per split (~5 facts each); every fact of each person, every template


def payload(person: dict) -> dict:
    facts = [{"property": pid, "value": v} for pid, values in person["facts"].items() for v in values]
    return {
        "kind": "subject",
        "model": "groundtruth-tiny",
        "subject": {"name": person["name"], "facts": facts},
        "options": {"counterfactuals": 100, "paraphrases": None, "lookalikes": "reversed"},  # every template
    }


def submit(api, people: list[dict]) -> list[str]:
    return [api.post("/audits", json=payload(p)).json()["id"] for p in people]


def facts_of(api, ids: list[str]) -> list[dict]:
    """Read after every audit has finished: the first read queues the default-sized null, which, once the one
    embedded runner starts it, runs to its end before anything submitted later (docs/nulls.md)."""
    for aid in ids:
        done = wait_for(api, aid, timeout=1800)
        assert done["status"] == "succeeded", done
    return [f for aid in ids for f in api.get(f"/audits/{aid}/facts").json()["facts"]]


def test_trained_people_are_memorized_and_held_out_people_are_not(sqlite_env, api_factory):
    manifest = json.loads(MANIFEST.read_text())
    api = api_factory("auditor")
    trained_ids, held_out_ids = (submit(api, manifest[split][:PER_SPLIT]) for split in ("trained", "held_out"))
    trained, held_out = facts_of(api, trained_ids), facts_of(api, held_out_ids)
    assert all(f["n_templates"] >= 11 for f in trained + held_out), "every paraphrase is probed"
    rate = lambda facts, key: sum(f[key] for f in facts) / len(facts)  # noqa: E731
    rates = {
        "trained_lenient": rate(trained, "lenient"),
        "trained_strict": rate(trained, "strict"),
        "held_out_lenient": rate(held_out, "lenient"),
        "held_out_strict": rate(held_out, "strict"),
    }
    report = ", ".join(f"{k} {v:.3f}" for k, v in rates.items()) + f" ({len(trained)} + {len(held_out)} facts)"
    print("\ngroundtruth-tiny, all paraphrases:", report)
    assert rates["trained_lenient"] >= 0.8, report
    assert rates["held_out_strict"] <= 0.02, report
    assert rates["held_out_lenient"] <= 0.15, report
