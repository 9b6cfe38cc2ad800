"""Schemathesis against a live API (uvicorn on loopback, real Postgres and Redis, a loopback Wikidata): every
operation of the OpenAPI document, all of schemathesis' checks, all its phases (stateful included), a bounded
number of cases per operation (MEMAUDIT_FUZZ_EXAMPLES, default 40; MEMAUDIT_FUZZ_SEED picks another draw)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.app.wikidata.fake_server import FakeWikidata
from tests.conftest import make_key

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "schemathesis.toml"
MAX_EXAMPLES = int(os.environ.get("MEMAUDIT_FUZZ_EXAMPLES", "40"))
SEED = os.environ.get("MEMAUDIT_FUZZ_SEED", "20261123")
ITEMS = "1::Toy Story (1995)::Animation|Comedy\n2::Jumanji (1995)::Adventure\n3::Heat (1995)::Action\n"
FACTS = [{"property": "P106", "value": "physicist"}, {"property": "P27", "value": "Germany"}]
GRID = {
    "architectures": [{"n_layer": 1, "d_model": 8, "n_head": 2}],
    "vocab_size": 16,
    "seq_len": 8,
    "dataset_sizes": [8, 64],
}
STRINGS = [{"text": f"customer {i} ordered item {i * 7 % 5}"} for i in range(8)]


@pytest.fixture
def wikidata():
    fake = FakeWikidata().start()
    yield fake
    fake.stop()


def seed(client) -> dict[str, str]:
    """One resource of each kind, so that operations needing an id reach the code behind it (the config file
    names them through these environment variables)."""
    dataset = client.post("/datasets", data={"name": "fuzz"}, files={"items": ("movies.dat", ITEMS.encode())})
    assert dataset.status_code == 201, dataset.text
    bodies = {
        "SUBJECT": {"kind": "subject", "model": "groundtruth-tiny", "subject": {"name": "Fuzz Person", "facts": FACTS}},
        "COVERAGE": {
            "kind": "coverage",
            "model": "groundtruth-tiny",
            "dataset_id": dataset.json()["id"],
            "target": "items",
            "options": {"k": 1},
        },
        "CAPACITY": {"kind": "capacity", "model": "scratch", "grid": GRID},
        "DYNAMICS": {"kind": "dynamics", "model": "groundtruth-tiny", "strings": STRINGS},
    }
    ids = {"FUZZ_DATASET": dataset.json()["id"]}
    for name, body in bodies.items():
        created = client.post("/audits", json=body)
        assert created.status_code == 202, created.text
        ids[f"FUZZ_{name}_AUDIT"] = created.json()["id"]
    return ids


def test_the_api_keeps_its_openapi_promises(live_api, wikidata, tmp_path):
    # Limits off: a fuzzer on one key would otherwise meet mostly 429s (the limits have their own tests). The event
    # stream of an audit that no worker runs lasts its whole lifetime: 0.2 s here: one read and a `timeout`
    # event (at 2 s those streams were 86 of the run's 183 s, the fuzzer waiting on them one by one).
    api = live_api(
        MEMAUDIT_RATE_LIMIT_PER_MINUTE="0",
        MEMAUDIT_SUBMIT_RATE_PER_MINUTE="0",
        MEMAUDIT_MAX_ACTIVE_AUDITS_PER_KEY="0",
        MEMAUDIT_WIKIDATA_API_URL=wikidata.url,
        MEMAUDIT_EVENTS_MAX_SECONDS="0.2",
    )
    key = make_key("auditor")
    with api.client(key) as client:
        ids = seed(client)
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(CONFIG),
        "run",
        f"{api.url}/openapi.json",
        "--header",
        f"Authorization: Bearer {key}",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        SEED,
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path),
    ]
    hooks = {
        "SCHEMATHESIS_HOOKS": "fuzz_hooks",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    env = {**os.environ, **ids, **hooks, "NO_COLOR": "1"}
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    (tmp_path / "schemathesis.out").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-12000:] + run.stderr[-3000:]
    assert "Exception in ASGI application" not in api.log_text()
