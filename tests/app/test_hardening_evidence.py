"""Hardening round three (issue 44), the permanent record: no client free text in an evidence entry (item 4), and
one truth for the public key's format (item 5). Real Postgres; the audit runs in this process (as a worker would).

The probes: `GET /forget-set?model=<any text>` answered 200 (0 records) and stored the text in the export's
evidence entry, which survives erasure and goes to regulators; a key saved as the docs said (the answer of
`GET /evidence/public-key`) was refused by `memaudit evidence verify --public-key`."""

from __future__ import annotations

import json

from tests.app.evidence.test_evidence import TINY, evidence_pg, export_and_key, payloads, verify  # noqa: F401
from tests.support.faults import subject_body

MARK = "Zyxwv Marker"  # a string no entry may hold: what a client could send


def test_free_text_filters_are_refused_with_the_field_named(evidence_pg, api_factory):  # noqa: F811
    pipeline = api_factory("pipeline")
    for field, value in (
        ("model", f"{MARK} was born in Lyon"),
        ("audit_id", MARK),
        ("batch_id", MARK),
        ("property", MARK),
    ):
        r = pipeline.get("/forget-set", params={field: value})
        assert r.status_code == 422, (field, r.status_code, r.text)
        detail = r.json()["detail"][0]
        assert detail["field"] == field and MARK not in r.text, (field, r.text)
    assert pipeline.get("/forget-set", params={"model": "groundtruth-tiny"}).status_code == 200, "a registered model"


def test_no_entry_kind_holds_a_request_supplied_string(evidence_pg, api_factory, tmp_path):  # noqa: F811
    """Every place a request can put a string on the way to an entry gets a marker: the audit's Idempotency-Key,
    every forget-set filter (refused when free text; the model, audit, batch and
    property named by what exists are kept). Then every entry of every kind written (audit finished, export,
    erasure) is read back from the chain and from the table: none holds a marker."""
    from sqlalchemy import text

    from app.db.engine import session_scope
    from app.evidence.schemas import EntryKind
    from workers.jobs.subject import run

    auditor, pipeline, regulator = (api_factory(role) for role in ("auditor", "pipeline", "regulator"))
    created = auditor.post("/audits", json=subject_body(0, **TINY), headers={"Idempotency-Key": MARK})
    assert created.status_code == 202, created.text
    audit = created.json()
    run(audit["id"])
    for field in ("model", "audit_id", "batch_id", "property"):
        assert pipeline.get("/forget-set", params={field: MARK, "policy": "lenient"}).status_code == 422, field
    for fmt in ("jsonl", "csv", "tofu"):
        params = {"model": "groundtruth-tiny", "audit_id": audit["id"], "policy": "lenient", "format": fmt}
        delivered = pipeline.get("/forget-set", params=params)
        assert delivered.status_code == 200, delivered.text
    erased = auditor.delete(f"/subjects/{audit['subject_id']}")
    assert erased.status_code == 200, erased.text

    chain, key = export_and_key(regulator, tmp_path)
    assert verify(chain, key) == 0
    kinds = {p["kind"] for p in payloads(chain)}
    written = {EntryKind.AUDIT_FINISHED, EntryKind.FORGET_SET_EXPORT, EntryKind.ERASED}
    assert written <= kinds, kinds
    with session_scope() as s:
        table = s.execute(text("SELECT * FROM evidence_entries")).all()
    dump = chain.read_text() + json.dumps([[str(c) for c in row] for row in table], ensure_ascii=False)
    for part in (MARK, *MARK.split()):
        assert part not in dump, f"a request-supplied string in the evidence record: {part!r}"
    exports = [p for p in payloads(chain) if p["kind"] == EntryKind.FORGET_SET_EXPORT]
    assert len(exports) == 3 and all(p["body"]["filters"]["model"] == "groundtruth-tiny" for p in exports)
    print(f"\n{len(table)} evidence entries of kinds {sorted(kinds)}: no request-supplied string in any")


def test_a_public_key_saved_as_the_docs_say_verifies_the_chain(evidence_pg, api_factory, tmp_path, capsys):  # noqa: F811
    """docs/reliability.md: save the answer of GET /evidence/public-key as it comes, or the PEM that `memaudit
    evidence public-key` prints; `memaudit evidence verify --public-key` takes either, and refuses anything else
    naming the option."""
    from app.cli import main as cli

    auditor, regulator = api_factory("auditor"), api_factory("regulator")
    created = auditor.post("/audits", json=subject_body(0, **TINY)).json()
    assert auditor.delete(f"/subjects/{created['subject_id']}").status_code == 200  # an entry: the erasure
    chain, _ = export_and_key(regulator, tmp_path)
    answer = regulator.get("/evidence/public-key")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    saved = tmp_path / "evidence-key.json"
    saved.write_bytes(answer.content)  # `curl -o evidence-key.json .../evidence/public-key`
    assert verify(chain, saved) == 0, "the key as GET /evidence/public-key serves it"
    capsys.readouterr()
    assert cli(["evidence", "public-key"]) == 0
    printed = tmp_path / "printed.pem"
    printed.write_text(capsys.readouterr().out)  # `memaudit evidence public-key > printed.pem`
    assert printed.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    assert verify(chain, printed) == 0
    for name, content in (("bad.json", '{"pem": 5}'), ("bad.pem", "not a key")):
        (tmp_path / name).write_text(content)
        assert verify(chain, tmp_path / name) == 2
        assert "--public-key: not an Ed25519 public key" in capsys.readouterr().err
