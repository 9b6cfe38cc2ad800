"""The command line as a user runs it: keys, a local audit, export, and `serve` answering a remote audit."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import Api, _reset_caches
from tests.support import loopback
from tests.support.cli import MANIFEST, REPO, cli_env_at, memaudit
from tests.support.servers import free_port


def trained_person() -> dict:
    return json.loads(MANIFEST.read_text())["trained"][0]


def fact_args(person: dict) -> list[str]:
    return [a for pid, values in person["facts"].items() for v in values for a in ("--fact", f"{pid}={v}")]


@dataclass(frozen=True)
class LocalAudit:
    env: dict[str, str]
    person: dict
    result: dict  # `memaudit audit --json`'s output


@pytest.fixture(scope="module")
def local_audit(tmp_path_factory: pytest.TempPathFactory) -> LocalAudit:
    """One local `memaudit audit` of a trained person on its own SQLite database, for the tests of this module."""
    env = cli_env_at(tmp_path_factory.mktemp("cli"))
    person = trained_person()
    run = memaudit(
        env,
        "audit",
        "--model",
        "groundtruth-tiny",
        "--name",
        person["name"],
        *fact_args(person),
        "--paraphrases",
        "2",
        "--null-wait",  # the facts read once (the access-log test counts it); waiting polls them
        "0",
        "--json",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return LocalAudit(env, person, json.loads(run.stdout))


def test_keys_local_audit_and_export(local_audit):
    env, result = local_audit.env, local_audit.result
    made = memaudit(env, "keys", "create", "--role", "auditor", "--name", "ci")
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout.splitlines()[0])
    assert key["role"] == "auditor" and key["key"].startswith("mak_")
    listed = memaudit(env, "keys", "list")
    assert key["key"] not in listed.stdout and '"role": "auditor"' in listed.stdout

    assert result["audit"]["status"] == "succeeded"
    assert sum(f["lenient"] for f in result["facts"]) >= 4, result["facts"]

    exported = memaudit(env, "export", "--format", "csv", "--policy", "lenient")
    assert exported.returncode == 0 and exported.stdout.startswith("subject_id,")
    assert local_audit.person["name"] in exported.stdout

    bad = memaudit(env, "audit", "--name", "X Y", "--fact", "P999999=x", "--model", "groundtruth-tiny")
    assert bad.returncode != 0 and "subject.facts[0].property" in bad.stderr


def access_log(env: dict[str, str]) -> list[tuple]:
    database = env["MEMAUDIT_DATABASE_URL"].removeprefix("sqlite:///")
    with closing(sqlite3.connect(database)) as db:
        return db.execute("SELECT principal, role, action, subject_id, audit_id FROM access_log ORDER BY id").fetchall()


def test_a_local_facts_read_writes_the_access_log_entry_the_api_writes(local_audit, monkeypatch):
    """The local CLI is the API's client (in process, as the key `cli`): its facts read goes through the same route
    and leaves the same access-log entry as an admin key's read over the API (docs/reliability.md: every read)."""
    cli_env, audit_id = local_audit.env, local_audit.result["audit"]["id"]
    cli_key = next(
        k for k in map(json.loads, memaudit(cli_env, "keys", "list").stdout.splitlines()) if k["name"] == "cli"
    )
    by_cli = [row for row in access_log(cli_env) if row[2] == "read_facts"]
    assert by_cli and {row[0] for row in by_cli} == {f"key:{cli_key['id']}"}  # `audit` read the facts as key cli

    admin = json.loads(memaudit(cli_env, "keys", "create", "--role", "admin").stdout.splitlines()[0])
    monkeypatch.setenv("MEMAUDIT_DATABASE_URL", cli_env["MEMAUDIT_DATABASE_URL"])
    _reset_caches()
    try:
        assert Api(admin["key"]).get(f"/audits/{audit_id}/facts").status_code == 200
    finally:
        monkeypatch.undo()
        _reset_caches()
    by_api = [row for row in access_log(cli_env) if row[2] == "read_facts" and row[0] == f"key:{admin['id']}"]
    assert len(by_api) == 1
    assert by_api[0][1:] == by_cli[-1][1:] == ("admin", "read_facts", by_cli[-1][3], audit_id)
    assert by_cli[-1][3] is not None  # the audited subject


def test_serve_runs_audits_submitted_over_http(cli_env):
    # a small null (as tests/app/test_cli_first_run.py's demo): the command still waits for it over HTTP, reading
    # the facts page (an auditor's key may not read the service's null audits), and the serve process computes it
    cli_env = {**cli_env, "MEMAUDIT_NULL_FACTS_PER_PROPERTY": "20", "MEMAUDIT_NULL_MIN_PEOPLE": "3"}
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
                if loopback.get(f"{url}/health").status_code == 200:
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


def test_the_typical_names_caveat_is_said_once_under_the_table_with_its_properties():
    """Under the table the CLI says the API's calibration caveat once, naming the properties it holds for (citizenship,
    birthplace, languages: their null understates the false-positive rate for ordinary names); a table without one
    says nothing."""
    from app.cli.audit import typical_names_line
    from app.nulls.calibrate import TYPICAL_NAMES_CAVEAT

    def row(label: str, caveat: str | None) -> dict:
        return {"label": label, "calibration": {"status": "ready", "caveat": caveat}}

    assert typical_names_line([row("occupation", None), {"label": "sex or gender", "calibration": None}]) is None
    assert typical_names_line([]) is None
    rows = [row("languages spoken, written or signed", TYPICAL_NAMES_CAVEAT), row("occupation", None)]
    rows += [row("country of citizenship", TYPICAL_NAMES_CAVEAT), row("country of citizenship", TYPICAL_NAMES_CAVEAT)]
    line = typical_names_line(rows)
    assert line == f"languages spoken, written or signed, country of citizenship: {TYPICAL_NAMES_CAVEAT}."


def test_migrate_says_what_it_did_and_imports_the_shipped_nulls(cli_env, tmp_path):
    """A fresh database is created, not "already at the latest schema", and gets the nulls shipped for its models
    then, not inside the first submission (app.nulls.service.import_shipped_nulls); the second run says the schema
    was current and imports nothing twice."""
    first = memaudit(cli_env, "migrate")
    assert first.returncode == 0 and first.stdout.startswith("created the database at the latest schema:"), first
    assert "imported the nulls shipped for groundtruth-tiny" in first.stdout, first.stdout
    db = tmp_path / "cli.sqlite3"
    with closing(sqlite3.connect(db)) as con:
        shipped = con.execute("SELECT count(*) FROM audits WHERE kind = 'null' AND status = 'succeeded'").fetchone()
    assert shipped[0] >= 1
    again = memaudit(cli_env, "migrate")
    assert again.stdout.startswith("the database was already at the latest schema:"), again.stdout
    assert "imported" not in again.stdout
    with closing(sqlite3.connect(db)) as con:
        assert con.execute("SELECT count(*) FROM audits WHERE kind = 'null'").fetchone() == shipped
