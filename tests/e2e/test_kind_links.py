"""Every kind's advertised links answer 200 once its audit has finished: one cheap audit per kind and mode on the
embedded default (SQLite + in-process worker), its `links` walked. A link a kind advertises but does not serve
(a text-mode capacity audit's grid, say) fails here."""

from __future__ import annotations

import json

import numpy as np

from app.kinds import KINDS
from core.dynamics.trajectories import write_trajectories
from core.measures.dynamics import Trajectories
from tests.conftest import wait_for

ITEMS = "".join(f"{i}::Film number {i} (199{i % 10})::Drama\n" for i in range(1, 7))
TRAJECTORIES = Trajectories(["a", "b"], [1, 2], np.array([[2.0, 0.1], [1.0, 0.9]]), np.array([[2.0, 1.5], [1.0, 0.9]]))


def audits(dataset_id: str) -> dict[str, dict]:
    """The cheapest finished audit of each kind and mode (groundtruth-tiny is the only model loaded)."""
    person = {"name": "Ada Lovelace", "facts": [{"property": "P106", "value": "mathematician"}]}
    subject_options = {"paraphrases": 0, "counterfactuals": 5, "near_duplicates": False}
    grid = {
        "architectures": [{"n_layer": 1, "d_model": 8, "n_head": 2}],
        "vocab_size": 16,
        "seq_len": 8,
        "dataset_sizes": [8],
    }
    return {
        "subject": {"kind": "subject", "model": "groundtruth-tiny", "subject": person, "options": subject_options},
        "coverage": {
            "kind": "coverage",
            "model": "groundtruth-tiny",
            "dataset_id": dataset_id,
            "target": "items",
            "options": {"k": 1, "sample": 2, "max_new_tokens": 8},
        },
        "capacity uniform": {"kind": "capacity", "model": "scratch", "grid": grid, "options": {"steps": 5}},
        "capacity text": {
            "kind": "capacity",
            "model": "groundtruth-tiny",
            "mode": "text",
            "text": {"texts": ["Ada Lovelace was a mathematician."], "reference": "groundtruth-tiny"},
        },
        "null": {
            "kind": "null",
            "model": "groundtruth-tiny",
            "properties": ["P106"],
            "options": subject_options,
            "method": "pseudo",
            "facts_per_property": 3,
            "min_people": 1,
        },
        "dynamics": {
            "kind": "dynamics",
            "model": "hf:acme/provider-llm",
            "trajectories": {"format": "jsonl", "content": "".join(write_trajectories(TRAJECTORIES, "jsonl"))},
        },
    }


EXPECTED_LINKS = {
    "subject": {"self", "facts"},
    "coverage": {"self", "records"},
    "capacity uniform": {"self", "grid", "series"},
    "capacity text": {"self", "texts"},
    "dynamics": {"self", "strings", "series"},
    "null": {"self", "null"},
    "verification": {"self", "verification"},
}


def verification(subject_id: int) -> dict:
    """A verification of the subject audit's person (it needs that audit finished): the same weights as an hf: path."""
    from app.settings import GROUNDTRUTH_DIR

    after = f"hf:{GROUNDTRUTH_DIR}"
    people = {"subject_ids": [subject_id]}
    return {"kind": "verification", "model": after, "before": "groundtruth-tiny", "people": people}


def test_every_advertised_link_of_a_finished_audit_answers_200(sqlite_env, api_factory):
    api = api_factory("auditor")
    upload = api.post("/datasets", data={"name": "films"}, files={"items": ("movies.dat", ITEMS.encode())})
    assert upload.status_code == 201, upload.text
    bodies = audits(upload.json()["id"])
    assert {body["kind"] for body in bodies.values()} | {"verification"} == set(KINDS), "one of every kind"
    created = {}
    for label, body in bodies.items():
        r = api.post("/audits", json=body)
        assert r.status_code == 202, (label, r.text)
        created[label] = r.json()["id"]
    subject_id = wait_for(api, created["subject"], timeout=300)["subject_id"]
    r = api.post("/audits", json=verification(subject_id))
    assert r.status_code == 202, r.text
    created["verification"] = r.json()["id"]
    for label, audit_id in created.items():
        done = wait_for(api, audit_id, timeout=300)
        assert done["status"] == "succeeded", (label, done)
        links = done["links"]
        assert set(links) == EXPECTED_LINKS[label], (label, links)
        for name, url in links.items():
            r = api.get(url)
            assert r.status_code == 200, (label, name, url, r.text[:300])
            if r.headers["content-type"].startswith("application/x-ndjson"):
                assert [json.loads(line) for line in r.text.splitlines()], (label, name, "no rows")
