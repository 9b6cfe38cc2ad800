"""Stored rows for tests that read results without running a model: a subject and its succeeded audit."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.orm import Session


def stored_subject_audit(
    s: Session, key_id: int, name: str, pids: set[str], wikidata_id: str | None = None, **audit: Any
) -> tuple[Any, Any]:
    """(Subject, Audit): a subject of key ``key_id`` and a succeeded groundtruth-tiny subject audit of it, added to
    ``s`` (the catalog properties ``pids`` mirrored first); ``audit`` sets or overrides the audit's columns."""
    from app.db.models import Audit, Subject
    from app.wikidata.repository import ensure_properties

    ensure_properties(s, pids)
    subject = Subject(name=name, wikidata_id=wikidata_id, owner_key_id=key_id)
    s.add(subject)
    s.flush()
    row = Audit(
        **{
            "id": uuid.uuid4().hex,
            "kind": "subject",
            "model": "groundtruth-tiny",
            "options": {},
            "status": "succeeded",
            "owner_key_id": key_id,
            "subject_id": subject.id,
            **audit,
        }
    )
    s.add(row)
    return subject, row
