"""`memaudit verify` as a user runs it (a subprocess on its own SQLite file, the embedded worker): audit a trained
person, export the forget set, verify the same weights under an hf: name against it, and read the statuses in the
table and in --json (the context probe's line: tests/e2e/test_verification_api.py); the same export named by its
file's SHA-256 (--by-reference), cited by the verification's evidence entries; a forget-set file that is not
JSON is refused by its line number, never its text. A tiny null keeps it quick (its coarse p-values make most facts
inconclusive; tests/e2e/test_verification.py measures)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from app.settings import GROUNDTRUTH_DIR
from tests.support.cli import MANIFEST, memaudit

SMALL_NULL = {"MEMAUDIT_NULL_MIN_PEOPLE": "2", "MEMAUDIT_NULL_MAX_PEOPLE": "3", "MEMAUDIT_NULL_FACTS_PER_PROPERTY": "3"}


def test_verify_reads_the_exported_forget_set_and_prints_each_status(cli_env: dict[str, str], tmp_path: Path) -> None:
    env = cli_env | SMALL_NULL | {"MEMAUDIT_TORCH_THREADS": "1"}
    person = json.loads(MANIFEST.read_text())["trained"][0]
    facts = [a for pid, values in person["facts"].items() for v in values for a in ("--fact", f"{pid}={v}")]
    audited = memaudit(env, "audit", "--model", "groundtruth-tiny", "--name", person["name"], *facts, "--json")
    assert audited.returncode == 0, audited.stderr
    forget_set = tmp_path / "fs.jsonl"
    exported = memaudit(env, "export", "--policy", "lenient", "-o", str(forget_set))
    assert exported.returncode == 0, exported.stderr
    after = f"hf:{GROUNDTRUTH_DIR}"
    args = ["verify", "--before", "groundtruth-tiny", "--after", after, "--forget-set", str(forget_set)]
    shown = memaudit(env, *args)
    assert shown.returncode == 0, shown.stderr
    assert "forget-set facts:" in shown.stdout and "removed 0" in shown.stdout, shown.stdout
    assert person["name"] not in shown.stdout, "ids and statuses, no names"
    assert "the forget-set export verified" not in shown.stdout, "records sent: no export named"

    # --json, by reference: the file's SHA-256 names the export; the same facts are verified and the chain links the
    # two (one verification for both: each costs a model load per process)
    by_ref = memaudit(env, *args, "--by-reference", "--json")
    assert by_ref.returncode == 0, by_ref.stderr
    referenced = json.loads(by_ref.stdout)
    records = [json.loads(line) for line in forget_set.read_text().splitlines() if '"_end"' not in line]
    assert referenced["export"]["sha256"] == hashlib.sha256(forget_set.read_bytes()).hexdigest()
    assert {(f["subject_id"], f["property"]) for f in referenced["facts"] if f["target"]} == {
        (r["subject_id"], r["property"]) for r in records
    }
    assert all(f["status"] in ("still retrievable", "inconclusive") for f in referenced["facts"]), referenced["facts"]
    chain_file = tmp_path / "evidence.jsonl"
    assert memaudit(env, "evidence", "export", "-o", str(chain_file)).returncode == 0
    entries = [json.loads(json.loads(line)["payload"]) for line in chain_file.read_text().splitlines()[:-1]]
    exports = [
        e for e in entries if e["kind"] == "forget_set_export" and e["body"]["sha256"] == referenced["export"]["sha256"]
    ]
    assert [e["seq"] for e in exports] == [referenced["export"]["seq"]]
    assert sorted(map(tuple, exports[0]["body"]["facts"])) == sorted((r["audit_id"], r["property"]) for r in records)
    checks = [e for e in entries if e["kind"] == "verification" and e["audit_id"] == referenced["audit_id"]]
    assert checks and all(e["body"]["export_seq"] == referenced["export"]["seq"] for e in checks)
    # a changed file names no export: refused, naming the field and the way out
    changed = tmp_path / "changed.jsonl"
    changed.write_bytes(forget_set.read_bytes() + b"\n")
    refused = memaudit(env, *args[:-1], str(changed), "--by-reference")
    assert refused.returncode != 0 and "people.export_sha256" in refused.stderr, refused.stderr

    bad = tmp_path / "bad.jsonl"
    bad.write_text(f'{{"subject_id": 1}}\n{person["name"]} is not JSON\n')
    refused = memaudit(env, "verify", "--before", "groundtruth-tiny", "--after", after, "--forget-set", str(bad))
    assert refused.returncode != 0 and "line 2" in refused.stderr and person["name"] not in refused.stderr
