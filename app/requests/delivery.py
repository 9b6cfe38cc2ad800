"""A delivery's file: the forget set of one audit as JSON lines with its end marker, the format GET /forget-set
writes (workers/unlearning/reference.py and `memaudit verify --forget-set` read it). The read is an access-log
entry (``deliver_forget_set``); the evidence entry is the delivery's own (app.requests.service.deliver), not an
export's."""

from __future__ import annotations

from typing import Any

from app.auth.keys import Principal
from app.forget_set.service import records
from app.policies import ForgetFilters
from app.privacy.access_log import logged_export
from app.streaming import jsonl_lines, with_end_marker

DELIVERED = "deliver_forget_set"  # access-log action


def forget_set_file(principal: Principal, audit_id: str, policy: str) -> tuple[str, int, list[list[str]]]:
    """(the file's text, its records, the facts it holds as [audit id, property]: no name, no value)."""
    left_out: dict[str, Any] = {}
    found = records(principal, ForgetFilters(audit_id=audit_id, policy=policy), left_out=left_out)
    rows = list(logged_export(found, principal, DELIVERED))
    text = "".join(with_end_marker(jsonl_lines(rows), lambda: left_out))
    facts = sorted({(r["audit_id"], r["property"]) for r in rows})
    return text, len(rows), [list(f) for f in facts]
