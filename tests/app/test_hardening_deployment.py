"""Hardening round three (issue 44, item 6): with Postgres statement logging on, names and values reach the server
log, which erasure cannot reach; docs/deployment.md says so and gives the settings that keep them out. This test
applies the docs' settings block to a real Postgres database and checks that a subject's name stays out of the
server log, and (so that it can fail) that with `log_statement = 'all'` it does not."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO, Api, _reset_caches, make_key, migrated_database

NAME = "Quillon Vardemarsh-Oyelaran"
SECTION = "## Postgres logging, and what erasure cannot reach"


def documented_settings() -> dict[str, str]:
    """`name = value` lines of the conf block in docs/deployment.md's logging section."""
    text = (REPO / "docs" / "deployment.md").read_text()
    assert SECTION in text, "docs/deployment.md has no section on Postgres logging"
    block = re.search(r"```conf\n(.*?)```", text[text.index(SECTION) :], re.S)
    assert block, "the section gives no settings block"
    pairs = (line.split("#")[0].split("=", 1) for line in block.group(1).splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs}


def _audit_under(postgres, pg_env, monkeypatch, label: str, settings: dict[str, str]) -> str:  # noqa: ANN001
    """Submit and erase one subject on a fresh database with ``settings``; the server log written meanwhile."""
    url = migrated_database(postgres, f"logs_{label}")
    database = url.rsplit("/", 1)[1]
    for name, value in settings.items():
        postgres._admin(f'ALTER DATABASE "{database}" SET {name} = {value}')
    pg_env["MEMAUDIT_DATABASE_URL"] = url
    monkeypatch.setenv("MEMAUDIT_DATABASE_URL", url)
    _reset_caches()
    log = postgres.root / "log"
    start = log.stat().st_size
    api = Api(make_key("auditor"))
    body = {
        "kind": "subject",
        "model": "groundtruth-tiny",
        "subject": {"name": NAME, "facts": [{"property": "P106", "value": "cartographer"}]},
    }
    created = api.post("/audits", json=body, headers={"Idempotency-Key": NAME})
    assert created.status_code == 202, created.text
    assert api.post("/audits", json=body, headers={"Idempotency-Key": NAME}).status_code == 202  # a replay
    assert api.delete(f"/subjects/{created.json()['subject_id']}").status_code == 200
    with log.open("rb") as fh:
        fh.seek(start)
        return fh.read().decode(errors="replace")


@pytest.mark.usefixtures("pg_env")
def test_the_documented_postgres_log_settings_keep_names_out_of_the_server_log(postgres, pg_env, monkeypatch):
    settings = documented_settings()
    assert settings.get("log_statement") in ("'ddl'", "'none'"), settings
    logged = _audit_under(postgres, pg_env, monkeypatch, "all", {"log_statement": "'all'"})
    assert NAME in logged, "statement logging did not log the name: this test would prove nothing"
    kept = _audit_under(postgres, pg_env, monkeypatch, "documented", settings)
    assert NAME not in kept and "cartographer" not in kept, "the documented settings let a name reach the log"
    print(f"\nlog_statement='all': the name logged {logged.count(NAME)} times; the documented settings: 0")
