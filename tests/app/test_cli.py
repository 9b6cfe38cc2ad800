"""The command line as a user runs it: keys, a local audit, export, and `serve` answering a remote audit."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx

from tests.support.cli import MANIFEST, REPO, memaudit
from tests.support.servers import free_port


def trained_person() -> dict:
    return json.loads(MANIFEST.read_text())["trained"][0]


def fact_args(person: dict) -> list[str]:
    return [a for pid, values in person["facts"].items() for v in values for a in ("--fact", f"{pid}={v}")]


def test_keys_local_audit_and_export(cli_env):
    made = memaudit(cli_env, "keys", "create", "--role", "auditor", "--name", "ci")
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout.splitlines()[0])
    assert key["role"] == "auditor" and key["key"].startswith("mak_")
    listed = memaudit(cli_env, "keys", "list")
    assert key["key"] not in listed.stdout and '"role": "auditor"' in listed.stdout

    person = trained_person()
    run = memaudit(
        cli_env,
        "audit",
        "--model",
        "groundtruth-tiny",
        "--name",
        person["name"],
        *fact_args(person),
        "--paraphrases",
        "2",
        "--json",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["audit"]["status"] == "succeeded"
    assert sum(f["lenient"] for f in result["facts"]) >= 4, result["facts"]

    exported = memaudit(cli_env, "export", "--format", "csv", "--policy", "lenient")
    assert exported.returncode == 0 and exported.stdout.startswith("subject_id,")
    assert person["name"] in exported.stdout

    bad = memaudit(cli_env, "audit", "--name", "X Y", "--fact", "P999999=x", "--model", "groundtruth-tiny")
    assert bad.returncode != 0 and "subject.facts[0].property" in bad.stderr


def test_serve_runs_audits_submitted_over_http(cli_env):
    key = json.loads(memaudit(cli_env, "keys", "create", "--role", "auditor").stdout.splitlines()[0])["key"]
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        env=cli_env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        person = trained_person()
        run = memaudit(
            cli_env,
            "audit",
            "--api-url",
            url,
            "--api-key",
            key,
            "--model",
            "groundtruth-tiny",
            "--name",
            person["name"],
            *fact_args(person),
            "--paraphrases",
            "1",
            "--json",
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert json.loads(run.stdout)["audit"]["status"] == "succeeded"
    finally:
        server.terminate()
        server.wait(timeout=20)
