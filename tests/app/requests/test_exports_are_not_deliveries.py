"""Issue 43's phantom deliveries: an export made to look at (GET /forget-set in jsonl, csv or tofu; `memaudit export
--format csv|tofu`, which used to read a second, full jsonl export for its end marker) records one export each and
no delivery, and the person's page never says an export was "sent". On Postgres, the subject audit run in-process
(no worker: its null stays pending, so the p-value policy exports nothing, and still records its export)."""

from __future__ import annotations

import json

from sqlalchemy import select

from app.cli import main as cli
from app.db.engine import session_scope
from app.db.models.evidence import EvidenceEntry
from app.db.models.privacy import AccessLog
from app.evidence.schemas import EntryKind
from tests.app.evidence.test_evidence import TINY, evidence_pg  # noqa: F401 (a fixture)
from tests.conftest import make_key
from tests.support.faults import audit_row, subject_body
from tests.support.ui import sign_in


def kinds() -> list[str]:
    with session_scope() as s:
        return list(s.scalars(select(EvidenceEntry.kind).order_by(EvidenceEntry.seq)))


def exports_logged() -> int:
    with session_scope() as s:
        return len(list(s.scalars(select(AccessLog.id).where(AccessLog.action == "export_forget_set"))))


def test_exports_record_one_export_each_and_no_delivery(evidence_pg, api_factory, tmp_path, capsys):  # noqa: F811
    from workers.jobs.subject import run

    token = make_key("auditor")
    auditor = api_factory(key=token)
    created = auditor.post("/audits", json=subject_body(0, **TINY)).json()
    run(created["id"])
    assert audit_row(created["id"]).status == "succeeded"
    for fmt in ("jsonl", "csv", "tofu"):
        answer = auditor.get("/forget-set", params={"audit_id": created["id"], "policy": "lenient", "format": fmt})
        assert answer.status_code == 200 and answer.text, (fmt, answer.text)
    assert kinds().count(EntryKind.FORGET_SET_EXPORT) == 3
    for fmt in ("csv", "tofu"):  # the default policy has p-values: the CLI asks for the end marker alone
        out = tmp_path / f"export.{fmt}"
        assert cli(["export", "--format", fmt, "--audit-id", created["id"], "-o", str(out)]) == 0
        assert "pending calibration" in capsys.readouterr().err, "the end marker's pending count still reaches the user"
    recorded = kinds()
    assert recorded.count(EntryKind.FORGET_SET_EXPORT) == 5, f"one entry per export, not two per CLI run: {recorded}"
    assert EntryKind.REQUEST_DELIVERED not in recorded, "an export is no delivery"
    # the access log records who was disclosed: the person, once per lenient export; the CLI's p-value exports
    # (their null pending) and their end markers disclosed nobody
    assert exports_logged() == 3

    sign_in(auditor.client, token, f"/ui/audits/{created['id']}/reply")
    page = auditor.client.get(f"/ui/audits/{created['id']}/reply")
    assert page.status_code == 200, page.text
    assert " was sent to " not in page.text.replace("What was sent to be removed", ""), "an export is no sending"
    assert "Nothing has been sent to be removed yet" in page.text


def test_the_end_marker_alone_discloses_nothing(evidence_pg, api_factory):  # noqa: F811
    from workers.jobs.subject import run

    auditor = api_factory("auditor")
    created = auditor.post("/audits", json=subject_body(0, **TINY)).json()
    run(created["id"])
    answer = auditor.get("/forget-set", params={"audit_id": created["id"], "policy": "lenient", "end_only": "true"})
    assert answer.status_code == 200
    [line] = answer.text.splitlines()
    end = json.loads(line)["_end"]
    assert end["records"] >= 1, "lenient selects the retrieved facts: the count is the export's"
    assert kinds() == [EntryKind.AUDIT_FINISHED] and exports_logged() == 0
