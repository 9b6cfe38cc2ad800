"""Queries on the catalog's properties mirrored in the database, and on what Wikidata imports stored: the
counterfactual pools they built."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import PoolValue, PropertyRow, Template, WikidataImport
from app.db.models.wikidata import ImportStatus
from core.catalog import load_catalog


def ensure_properties(session: Session, pids: set[str]) -> None:
    """Mirror catalog properties (and their templates) into the database where they are missing."""
    existing = set(session.scalars(select(PropertyRow.pid).where(PropertyRow.pid.in_(pids))))
    catalog = load_catalog()
    for pid in sorted(pids - existing):
        prop = catalog.get(pid)
        row = PropertyRow(pid=pid, label=prop.label, datatype=prop.datatype, value_type=prop.value_type)
        row.templates = [Template(index=i, text=t) for i, t in enumerate(prop.templates)]
        try:
            with session.begin_nested():  # concurrent first uses of a property: one insert wins, the rest skip
                session.add(row)
        except IntegrityError:
            pass
    session.flush()


def latest_pool(session: Session, pid: str) -> list[str]:
    """The pool of ``pid`` from the most recent finished import that built one (empty if none)."""
    latest = session.scalar(
        select(PoolValue.import_id)
        .join(WikidataImport, WikidataImport.id == PoolValue.import_id)
        .where(PoolValue.property_id == pid, WikidataImport.status == ImportStatus.SUCCEEDED)
        .order_by(PoolValue.import_id.desc())
        .limit(1)
    )
    if latest is None:
        return []
    stmt = select(PoolValue.value).where(PoolValue.import_id == latest, PoolValue.property_id == pid)
    return list(session.scalars(stmt.order_by(PoolValue.position)))
