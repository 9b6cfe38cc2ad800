"""Forget-set export: one record per memorized (subject, property, value), as JSON lines or CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from app.auth.keys import Principal
from app.catalog import load_catalog
from app.db.engine import session_factory
from app.errors import Forbidden
from app.forget_set.repository import ForgetFilters, memorized

EXPORTERS = ("admin", "auditor", "pipeline")
CSV_FIELDS = ["subject_id", "subject", "wikidata_id", "property", "property_label", "value", "share", "strict",
              "lenient", "z_star", "model", "audit_id", "canaries"]


def check_can_export(principal: Principal) -> None:
    if principal.role not in EXPORTERS:
        raise Forbidden(f"exporting a forget set needs the role admin, auditor or pipeline (you are {principal.role})")


def records(principal: Principal, filters: ForgetFilters) -> Iterator[dict[str, Any]]:
    """Runs in its own session: a streamed response outlives the request's session."""
    catalog = load_catalog()
    session = session_factory()()
    try:
        for result, audit, subject, facts, canaries in memorized(session, principal, filters):
            prop = catalog.get(result.property_id) if result.property_id in catalog else None
            retrieved = [
                prop.render(c.template_index, subject.name, "{value}") if prop else c.template for c in canaries
            ]
            for fact in facts:
                yield {
                    "subject_id": subject.id, "subject": subject.name, "wikidata_id": subject.wikidata_id,
                    "property": result.property_id, "property_label": prop.label if prop else None,
                    "value": fact.value, "share": result.share, "strict": result.strict,
                    "lenient": result.lenient, "z_star": result.z_star, "model": audit.model,
                    "audit_id": audit.id, "canaries": retrieved,
                }
    finally:
        session.close()


def as_jsonl(rows: Iterator[dict[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(row, ensure_ascii=False) + "\n"


def as_csv(rows: Iterator[dict[str, Any]]) -> Iterator[str]:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    writer.writeheader()
    for row in rows:
        writer.writerow(row | {"canaries": " | ".join(row["canaries"])})
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    if buf.getvalue():
        yield buf.getvalue()
