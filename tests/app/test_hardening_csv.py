"""CSV formula injection (issue 24, item 3): one rule, in the service's one CSV writer (app/streaming.py): a text
cell that a spreadsheet would run as a formula (starting with = + - @, a tab or a carriage return) is written with a
leading apostrophe (OWASP). Checked on every CSV the service writes: the forget set, a coverage audit's records and
a dynamics audit's strings; and no other CSV writer may appear in the service."""

from __future__ import annotations

import ast
import csv
import io
import uuid
from pathlib import Path

import numpy as np

from app.streaming import csv_lines
from core.dynamics.trajectories import write_trajectories
from core.measures.dynamics import Trajectories
from tests.conftest import make_key, wait_for
from tests.support.stored import stored_subject_audit

REPO = Path(__file__).resolve().parents[2]
FORMULAS = [
    '=HYPERLINK("http://example.invalid","click")',
    "=cmd|' /C calc'!A0",
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "\tx",
    "\ry",
]


def cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def assert_safe(text: str, expected: list[str]) -> None:
    """No cell starts like a formula, and each formula came out as its text behind an apostrophe."""
    rows = cells(text)
    found = [cell for row in rows[1:] for cell in row]
    assert not [c for c in found if c[:1] in ("=", "+", "-", "@", "\t", "\r")], found
    for value in expected:
        assert "'" + value in found, (value, found)


def test_the_writer_neutralises_formulas_and_keeps_numbers():
    rows = [{"text": f, "number": -1.5, "count": -3} for f in FORMULAS] + [{"text": "plain", "number": 2, "count": 0}]
    out = "".join(csv_lines(rows, ["text", "number", "count"]))
    assert_safe(out.replace("-1.5", "1.5").replace("-3", "3"), FORMULAS)
    parsed = cells(out)[1:]
    assert [r[0] for r in parsed] == ["'" + f for f in FORMULAS] + ["plain"]
    assert parsed[0][1:] == ["-1.5", "-3"], "numbers are written as they are"


def test_the_service_has_one_csv_writer():
    """A new CSV export must go through app.streaming.csv_lines (and so through the rule)."""
    writers = set()
    for path in (REPO / "app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("writer", "DictWriter")
                and isinstance(node.value, ast.Name)
                and node.value.id == "csv"
            ):
                writers.add(str(path.relative_to(REPO)))
    # app/coverage/parsing.py writes a dataset record back in its own format, as the prompt the model is probed
    # with: not a file anyone opens in a spreadsheet.
    assert writers == {"app/streaming.py", "app/coverage/parsing.py"}, writers


def _forget_set_audit(key: str) -> str:
    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.db.models import Fact, FactResult
    from app.settings import get_settings

    with session_scope() as s:
        key_id = authenticate(s, get_settings(), key).key_id
        subject, audit = stored_subject_audit(s, key_id, FORMULAS[0], {"P106"})
        facts = [Fact(property_id="P106", value=v, source="request") for v in FORMULAS[1:]]
        subject.facts.extend(facts)
        s.flush()
        s.add(
            FactResult(
                audit_id=audit.id,
                property_id="P106",
                fact_ids=[f.id for f in facts],
                share=1.0,
                strict=True,
                lenient=True,
                z_star=1.0,
                n_templates=1,
            )
        )
        return audit.id


def _coverage_audit(key: str) -> str:
    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.db.models import Audit, CoverageAudit, CoverageResult, Dataset, DatasetRecord
    from app.settings import get_settings

    with session_scope() as s:
        key_id = authenticate(s, get_settings(), key).key_id
        dataset = Dataset(name="formulas", owner_key_id=key_id)
        s.add(dataset)
        s.flush()
        audit = Audit(id=uuid.uuid4().hex, kind="coverage", model="groundtruth-tiny", options={}, status="succeeded")
        audit.owner_key_id = key_id
        s.add(audit)
        s.flush()
        s.add(CoverageAudit(audit_id=audit.id, dataset_id=dataset.id, target="items"))
        for i, value in enumerate(FORMULAS):
            record = DatasetRecord(dataset_id=dataset.id, target="items", line_no=i, key=value, line=value)
            s.add(record)
            s.flush()
            s.add(
                CoverageResult(
                    audit_id=audit.id,
                    record_id=record.id,
                    line_no=i,
                    key=value,
                    expected=value,
                    generated=value,
                    matched=True,
                    char_ratio=1.0,
                )
            )
        return audit.id


def test_every_csv_export_neutralises_formulas(sqlite_env, api_factory):
    key = make_key("admin")
    api = api_factory(key=key)
    forget = api.get("/forget-set", params={"audit_id": _forget_set_audit(key), "format": "csv", "policy": "lenient"})
    assert forget.status_code == 200, forget.text
    assert_safe(forget.text, FORMULAS)

    coverage = api.get(f"/audits/{_coverage_audit(key)}/records", params={"format": "csv"})
    assert coverage.status_code == 200, coverage.text
    assert_safe(coverage.text, FORMULAS)

    ids = ["=1+1", "@A1", "-x", "+y"]
    traj = Trajectories(ids, [0, 1], np.array([[1.0, 0.5]] * 4), np.array([[1.0, 0.9]] * 4))
    content = "".join(write_trajectories(traj, "jsonl"))
    body = {
        "kind": "dynamics",
        "model": "hf:acme/provider-llm",
        "trajectories": {"format": "jsonl", "content": content},
    }
    created = api.post("/audits", json=body)
    assert created.status_code == 202, created.text
    assert wait_for(api, created.json()["id"], timeout=120)["status"] == "succeeded"
    strings = api.get(f"/audits/{created.json()['id']}/strings", params={"format": "csv"})
    assert strings.status_code == 200, strings.text
    assert_safe(strings.text, ids)
