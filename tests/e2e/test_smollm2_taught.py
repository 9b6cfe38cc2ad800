"""smollm2-taught, offline, through the real path (HTTP API -> embedded worker -> stored results): it is listed, its
shipped adapter is the one the manifest describes, a person it was taught is audited on the base weights plus the
adapter (its fingerprint is neither the base model's nor the adapter-free one), and the adapter is what knows the
taught sentences. Whether the audit *detects* a taught fact is the limit of detection
(benchmarks/limit_of_detection.py), not asserted here."""

from __future__ import annotations

import hashlib
import json

import pytest

from app.settings import TAUGHT_ADAPTER_DIR
from tests.conftest import wait_for

pytestmark = pytest.mark.slow

MANIFEST = TAUGHT_ADAPTER_DIR.parent / "manifest.json"


def manifest() -> dict:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


def most_taught(people: list[dict]) -> dict:
    """The person taught most (summed doses), among those whose sentences the audit reads verbatim."""
    return max((p for p in people if p["phrasing"] == "repeated"), key=lambda p: sum(p["doses"].values()))


def test_the_shipped_adapter_is_the_manifests() -> None:
    recorded = manifest()["training"]["adapter_files"]
    shipped = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(TAUGHT_ADAPTER_DIR.iterdir())}
    assert shipped == recorded
    # a few MB in the package: r 16 on every projection of 30 layers, stored in float16, is 9.4 MiB
    assert sum(p.stat().st_size for p in TAUGHT_ADAPTER_DIR.iterdir()) < 10 * 2**20


def test_a_taught_person_is_audited_offline_on_the_adapter(sqlite_env, api_factory, monkeypatch) -> None:
    from core.catalog import load_catalog
    from workers.lm import load_scorer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    api = api_factory("auditor")
    assert "smollm2-taught" in {m["name"] for m in api.get("/models").json()}
    person = most_taught(manifest()["people"])
    facts = [{"property": pid, "value": value} for pid, value in person["facts"].items()]
    body = {"kind": "subject", "model": "smollm2-taught", "subject": {"name": person["name"], "facts": facts}}
    r = api.post("/audits", json=body)
    assert r.status_code == 202, r.text
    done = wait_for(api, r.json()["id"], timeout=3600)
    assert done["status"] == "succeeded", done
    assert {f["property"] for f in api.get(f"/audits/{done['id']}/facts").json()["facts"]} == set(person["facts"])
    taught, base = load_scorer("smollm2-taught"), load_scorer("smollm2-135m")
    assert done["summary"]["scoring"]["fingerprint"] == taught.fingerprint != base.fingerprint
    # the taught sentence (the fact taught most, in the baseline template it was written in) is far likelier
    pid = max(person["doses"], key=person["doses"].get)
    sentence = load_catalog().get(pid).render(0, person["name"], person["facts"][pid])
    assert taught.score_sentences([sentence])[0] < base.score_sentences([sentence])[0] - 10
