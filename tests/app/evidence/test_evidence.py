"""The evidence record end to end on Postgres (and the chain's rules on SQLite): every audit carries its
provenance (versions checked against importlib.metadata), every finished audit, delivered forget set and erasure
appends a signed entry; after an erasure the chain still verifies offline and neither the table nor its export
holds the person's name or facts; one changed byte, a dropped entry or a cut end fails `memaudit evidence verify`;
two writers never fork the chain; the signing key is made once with mode 0600 and rotates."""

from __future__ import annotations

import hashlib
import json
import platform
import stat
import subprocess
import threading
from importlib import metadata
from pathlib import Path

import pytest
from sqlalchemy import select, text

from app.cli import main as cli
from app.db.engine import session_scope
from app.db.models.evidence import EvidenceEntry
from tests.conftest import REPO, _reset_caches, migrated_database
from tests.support.faults import audit_row, person, subject_body

TINY = {"counterfactuals": 4, "paraphrases": 1, "similar_names": 1}


@pytest.fixture
def evidence_pg(pg_env, postgres, tmp_path, monkeypatch):
    """Postgres with a database and a signing key of its own (a chain from its first entry)."""
    url = migrated_database(postgres, "evidence")
    key = tmp_path / "keys" / "evidence.pem"
    for name, value in (("MEMAUDIT_DATABASE_URL", url), ("MEMAUDIT_EVIDENCE_KEY_FILE", str(key))):
        pg_env[name] = value
        monkeypatch.setenv(name, value)
    _reset_caches()
    return key


@pytest.fixture
def evidence_sqlite(sqlite_env, tmp_path, monkeypatch):
    from app.migrate import migrate

    url = f"sqlite:///{tmp_path / 'evidence.sqlite3'}"
    monkeypatch.setenv("MEMAUDIT_DATABASE_URL", url)
    monkeypatch.setenv("MEMAUDIT_EVIDENCE_KEY_FILE", str(tmp_path / "evidence.pem"))
    _reset_caches()
    migrate(url)
    return tmp_path / "evidence.pem"


def export_and_key(api, tmp_path: Path) -> tuple[Path, Path]:
    chain = api.get("/evidence")
    assert chain.status_code == 200, chain.text
    key = api.get("/evidence/public-key")
    assert key.status_code == 200 and key.json()["algorithm"] == "Ed25519"
    (tmp_path / "evidence.jsonl").write_text(chain.text)
    (tmp_path / "public.pem").write_text(key.json()["pem"])
    return tmp_path / "evidence.jsonl", tmp_path / "public.pem"


def verify(path: Path, *keys: Path) -> int:
    return cli(["evidence", "verify", str(path), *(a for k in keys for a in ("--public-key", str(k)))])


def entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def payloads(path: Path) -> list[dict]:
    return [json.loads(e["payload"]) for e in entries(path) if "payload" in e]


def check_commit(sha: str | None) -> None:
    """The checkout's commit when the process first recorded one: HEAD then, so HEAD now or one of its ancestors
    (others may commit to this checkout while the tests run). Outside a checkout: none."""
    if not (REPO / ".git").exists():
        assert sha is None
        return
    git = ["git", "-C", str(REPO)]
    assert (
        sha and subprocess.run([*git, "cat-file", "-t", sha], capture_output=True, text=True).stdout.strip() == "commit"
    )
    assert subprocess.run([*git, "merge-base", "--is-ancestor", sha, "HEAD"]).returncode == 0


def check_versions(block: dict) -> None:
    assert block["schema"] == "memaudit.provenance/1"
    assert block["memaudit"]["version"] == metadata.version("memaudit-gdpr")
    check_commit(block["memaudit"]["commit"])
    assert block["python"] == platform.python_version()
    assert block["torch"] == metadata.version("torch")
    assert block["transformers"] == metadata.version("transformers")


def test_audit_and_export_records_carry_provenance(evidence_pg, api_factory):
    from workers.jobs.subject import run

    auditor, pipeline = api_factory("auditor"), api_factory("pipeline")
    created = auditor.post("/audits", json=subject_body(0, **TINY)).json()
    assert created["provenance"] is None, "nothing has run yet: nothing to say what produced it"
    run(created["id"])
    audit = auditor.get(f"/audits/{created['id']}").json()
    assert audit["status"] == "succeeded"
    block = audit["provenance"]
    check_versions(block)
    assert auditor.get(f"/audits/{created['id']}/facts").json()["provenance"] == block, "the result page shows it"
    assert block["model_fingerprint"] == audit["summary"]["scoring"]["fingerprint"]
    assert block["scorer"]["backend"] == "hf" and block["scorer"]["implementation"] == "HFScorer"
    assert block["scorer"]["dtype"] == "float32"
    properties = set(person(0)["facts"])
    nulls = {n["property"]: n for n in block["nulls"]}
    assert set(nulls) == properties
    assert all(len(n["config_key"]) == 64 and n["status"] in ("pending", "ready", "missing") for n in nulls.values())

    for fmt in ("jsonl", "csv", "tofu"):
        r = pipeline.get("/forget-set", params={"audit_id": created["id"], "policy": "lenient", "format": fmt})
        assert r.status_code == 200 and r.text
        if fmt == "csv":
            import csv
            import io

            rows = [json.loads(row["provenance"]) for row in csv.DictReader(io.StringIO(r.text))]
        else:
            rows = [json.loads(line)["provenance"] for line in r.text.splitlines() if '"_end"' not in line]
        assert rows, f"{fmt}: nothing memorized, the test proves nothing"
        for record in rows:
            check_versions(record)
            assert record["model_fingerprint"] == block["model_fingerprint"]
            [null] = record["nulls"]
            assert null["config_key"] == nulls[null["property"]]["config_key"]


def test_erasure_keeps_a_verifiable_chain_without_personal_data(evidence_pg, api_factory, tmp_path):
    from workers.jobs.subject import run

    auditor, pipeline, regulator = (api_factory(role) for role in ("auditor", "pipeline", "regulator"))
    created = auditor.post("/audits", json=subject_body(0, **TINY)).json()
    run(created["id"])
    assert audit_row(created["id"]).status == "succeeded"
    delivered = pipeline.get("/forget-set", params={"audit_id": created["id"], "policy": "lenient"})
    assert delivered.status_code == 200 and delivered.text.count("\n") > 1, "nothing exported: proves nothing"
    assert auditor.delete(f"/subjects/{created['subject_id']}").status_code == 200
    assert auditor.get(f"/audits/{created['id']}").status_code == 404, "the erasure did not happen"

    assert pipeline.get("/evidence").status_code == 403 and auditor.get("/evidence").status_code == 403
    chain, key = export_and_key(regulator, tmp_path)
    assert verify(chain, key) == 0
    kinds = [(p["kind"], p["audit_id"]) for p in payloads(chain)]
    assert kinds == [
        ("audit_finished", created["id"]),
        ("forget_set_export", created["id"]),
        ("erased", None),
    ], kinds
    finished, exported, erased = payloads(chain)
    assert finished["subject_ref"] == exported["subject_ref"] == erased["subject_ref"] is not None
    assert erased["body"]["audits"] == [created["id"]] and erased["body"]["rows_deleted"]["facts"] > 0
    assert exported["body"]["sha256"] == hashlib.sha256(delivered.content).hexdigest(), "not the delivered bytes"
    assert exported["body"]["records"] == delivered.text.count("\n") - 1
    # one p-value per record (null while the null is pending: no worker runs it here; tests/ui/test_reply.py has them)
    properties = exported["body"]["properties"]
    assert sum(len(props["p_values"]) for props in properties.values()) == exported["body"]["records"]
    check_versions(finished["body"]["provenance"])
    assert finished["principal"].startswith("key:") and erased["principal"].startswith("key:")

    # nothing of the person: not in the table (every column, as text), not in its export
    who = person(0)
    secrets = [who["name"], *who["name"].split(), *(v for values in who["facts"].values() for v in values)]
    with session_scope() as s:
        table = s.execute(text("SELECT * FROM evidence_entries")).all()
        assert len(table) == 3
    dump = json.dumps([[str(c) for c in row] for row in table], ensure_ascii=False) + chain.read_text()
    for secret in secrets:
        assert secret not in dump and json.dumps(secret)[1:-1] not in dump, "personal data in the evidence"


def tampered(chain: Path, tmp_path: Path, name: str, change) -> Path:  # noqa: ANN001
    lines = chain.read_text().splitlines(keepends=True)
    out = tmp_path / f"{name}.jsonl"
    out.write_text("".join(change(lines)))
    return out


def one_byte(lines: list[str]) -> list[str]:
    row = json.loads(lines[1])
    row["payload"] = row["payload"].replace('"seq":2', '"seq":3', 1)  # one character of the entry
    return [lines[0], json.dumps(row) + "\n", *lines[2:]]


def test_verify_fails_on_one_changed_byte_a_dropped_entry_or_a_cut_end(evidence_sqlite, tmp_path, capsys):
    from app.evidence import repository
    from app.settings import get_settings

    with session_scope() as s:
        for i in range(5):
            repository.append(s, get_settings(), "erased", principal="key:1", body={"i": i, "p": 1e-5}, subject_id=i)
    out = tmp_path / "chain.jsonl"
    assert cli(["evidence", "export", "-o", str(out)]) == 0
    assert cli(["evidence", "public-key"]) == 0
    key = tmp_path / "public.pem"
    key.write_text(capsys.readouterr().out)
    assert verify(out, key) == 0
    assert "OK: 5 entries" in capsys.readouterr().out

    def flip(lines: list[str]) -> list[str]:  # one byte anywhere in an entry's line (here: the payload's value)
        i = lines[2].index('\\"i\\":2')
        return [*lines[:2], lines[2][: i + 6] + "7" + lines[2][i + 7 :], *lines[3:]]

    cases = {
        "flipped-byte": flip,
        "renumbered": one_byte,
        "dropped-middle": lambda lines: lines[:2] + lines[3:],
        "dropped-first": lambda lines: lines[1:],
        "dropped-last": lambda lines: [*lines[:4], lines[5]],
        "no-end-line": lambda lines: lines[:5],
        "swapped": lambda lines: [lines[0], lines[2], lines[1], *lines[3:]],
        "forged-signature": lambda lines: [lines[0].replace('"signature": "', '"signature": "00', 1), *lines[1:]],
    }
    for name, change in cases.items():
        assert verify(tampered(out, tmp_path, name, change), key) == 1, name
        assert "does not verify" in capsys.readouterr().err, name

    other = tmp_path / "other.pem"  # a key that signed nothing of it
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from app.evidence.chain import public_pem

    other.write_text(public_pem(Ed25519PrivateKey.generate().public_key()))
    assert verify(out, other) == 1


def test_key_is_made_once_with_mode_0600_and_rotation_keeps_the_chain(evidence_sqlite, tmp_path, caplog):
    from app.evidence import repository, service
    from app.settings import get_settings

    settings = get_settings()
    key_file = Path(settings.evidence_key_file)
    assert not key_file.exists()
    with caplog.at_level("INFO"), session_scope() as s:
        repository.append(s, settings, "erased", principal="key:1", body={}, subject_id=1)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    pem = key_file.read_text()
    assert "PRIVATE KEY" in pem and "PRIVATE KEY" not in caplog.text and pem.splitlines()[1] not in caplog.text
    old_public = tmp_path / "old.pem"
    old_public.write_text(service.public_key(settings).pem)

    key_file.rename(tmp_path / "retired.pem")  # rotation: the next use makes a new key; the chain goes on
    with session_scope() as s:
        repository.append(s, settings, "erased", principal="key:1", body={}, subject_id=2)
        lines = list(service.export_lines(s, settings))
    new_public = tmp_path / "new.pem"
    new_public.write_text(service.public_key(settings).pem)
    assert new_public.read_text() != old_public.read_text()
    chain = tmp_path / "chain.jsonl"
    chain.write_text("".join(lines))
    assert verify(chain, old_public, new_public) == 0
    assert verify(chain, new_public) == 1, "an entry signed by the retired key verified without its public key"


@pytest.mark.parametrize("env", ["evidence_pg", "evidence_sqlite"])
def test_two_writers_never_fork_the_chain(env, request, tmp_path):
    request.getfixturevalue(env)
    from app.evidence import repository, service
    from app.settings import get_settings

    settings, per_writer, errors = get_settings(), 15, []

    def writer(n: int) -> None:
        try:
            for i in range(per_writer):
                with session_scope() as s:
                    repository.append(s, settings, "erased", principal=f"key:{n}", body={"i": i}, subject_id=i)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    with session_scope() as s:
        seqs = list(s.scalars(select(EvidenceEntry.seq).order_by(EvidenceEntry.seq)))
        lines = list(service.export_lines(s, settings))
    assert seqs == list(range(1, 4 * per_writer + 1))
    chain, key = tmp_path / "chain.jsonl", tmp_path / "public.pem"
    chain.write_text("".join(lines))
    key.write_text(service.public_key(settings).pem)
    assert verify(chain, key) == 0
