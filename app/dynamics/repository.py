"""Every query on dynamics audits and their strings."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from app.db.models.dynamics import DynamicsAudit, DynamicsString
from core.measures.dynamics import Trajectories

CHUNK = 500


def add_strings(session: Session, rows: list[dict[str, Any]]) -> None:
    for start in range(0, len(rows), CHUNK):
        session.execute(insert(DynamicsString), rows[start : start + CHUNK])


def link(session: Session, audit_id: str) -> DynamicsAudit | None:
    return session.get(DynamicsAudit, audit_id)


def strings_in_order(session: Session, audit_id: str) -> list[DynamicsString]:
    return list(
        session.scalars(
            select(DynamicsString).where(DynamicsString.audit_id == audit_id).order_by(DynamicsString.position)
        )
    )


def trajectories(session: Session, audit_id: str, epochs: Sequence[int]) -> Trajectories:
    """Every string's stored losses as the measures take them (frequencies only when every string has one)."""
    strings = strings_in_order(session, audit_id)
    freq = [s.frequency for s in strings]
    return Trajectories(
        [s.string_id for s in strings],
        list(epochs),
        np.array([s.train_loss for s in strings]),
        np.array([s.heldout_loss for s in strings]),
        None if any(f is None for f in freq) else [float(f) for f in freq],
    )


def stream_strings(
    session: Session, audit_id: str, string_ids: Sequence[str] | None = None
) -> Iterator[DynamicsString]:
    """In position order, fetched in chunks so an export never holds the whole table."""
    stmt = select(DynamicsString).where(DynamicsString.audit_id == audit_id)
    if string_ids is not None:
        stmt = stmt.where(DynamicsString.string_id.in_(list(string_ids)))
    yield from session.scalars(stmt.order_by(DynamicsString.position).execution_options(yield_per=CHUNK))


def first_strings(session: Session, audit_id: str, limit: int) -> list[DynamicsString]:
    stmt = select(DynamicsString).where(DynamicsString.audit_id == audit_id).order_by(DynamicsString.position)
    return list(session.scalars(stmt.limit(limit)))


def save_trajectories(session: Session, audit_id: str, rows: list[dict[str, Any]], epochs: list[int]) -> None:
    """rows: {position, fold, train_loss, heldout_loss}. Overwrites, so a rerun of the job replaces its results."""
    for row in rows:
        session.execute(
            update(DynamicsString)
            .where(DynamicsString.audit_id == audit_id, DynamicsString.position == row["position"])
            .values(fold=row["fold"], train_loss=row["train_loss"], heldout_loss=row["heldout_loss"])
        )
    session.execute(update(DynamicsAudit).where(DynamicsAudit.audit_id == audit_id).values(epochs=epochs))
