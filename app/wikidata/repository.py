"""Queries on what Wikidata imports stored: the counterfactual pools they built."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import PoolValue, WikidataImport
from app.db.models.wikidata import ImportStatus


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
