"""WikiMem on the real SmolLM2-135M-Instruct: very well-known people's best-known facts surface, fictitious
people's (given the very same values) do not. Runs the real path: HTTP API → embedded worker → stored results.

Measured here (2 shared CPU cores, seed 0, baseline + 2 paraphrases, 20 counterfactuals, α = 1):
famous  — Pablo Picasso/Spain share 1.00, Vladimir Putin/Russia 0.67, Lionel Messi/Argentina 0.67 (all lenient);
fictitious with the same values — 1 of 4 lenient (a Spanish-sounding invented name and Argentina), mean share 0.08.
"""

from __future__ import annotations

import pytest

from tests.conftest import wait_for

pytestmark = pytest.mark.slow

OPTIONS = {"paraphrases": 2, "counterfactuals": 20, "seed": 0}
FAMOUS = [("Pablo Picasso", "Spain"), ("Vladimir Putin", "Russia"), ("Lionel Messi", "Argentina")]
FICTITIOUS = [
    ("Tobias Wrenfield", "Spain"),
    ("Quentin Valmorrow", "Russia"),
    ("Orlan Mestrovy", "Argentina"),
    ("Edwina Farthcole", "Spain"),
]


def audit(api, name: str, country: str) -> dict:
    body = {
        "kind": "subject",
        "model": "smollm2-135m",
        "options": OPTIONS,
        "subject": {"name": name, "facts": [{"property": "P27", "value": country}]},
    }
    r = api.post("/audits", json=body)
    assert r.status_code == 202, r.text
    done = wait_for(api, r.json()["id"], timeout=3600)
    assert done["status"] == "succeeded", done
    return api.get(f"/audits/{done['id']}/facts").json()["facts"][0]


def test_famous_facts_surface_and_fictitious_ones_do_not(sqlite_env, api_factory):
    api = api_factory("auditor")
    famous = [audit(api, *p) for p in FAMOUS]
    fictitious = [audit(api, *p) for p in FICTITIOUS]
    share = lambda facts: sum(f["share"] for f in facts) / len(facts)  # noqa: E731
    report = (
        f"famous shares {[round(f['share'], 2) for f in famous]}, "
        f"fictitious shares {[round(f['share'], 2) for f in fictitious]}"
    )
    print("\nsmollm2-135m, P27:", report)
    assert sum(f["lenient"] for f in famous) >= 2 and share(famous) >= 0.5, report
    assert not any(f["strict"] for f in fictitious) and share(fictitious) <= 0.2, report
    assert share(famous) - share(fictitious) >= 0.4, report
