"""Every query on capacity cells and text samples."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.db.models.capacity import CapacityCell, CapacityText


def cells(session: Session, audit_id: str) -> list[CapacityCell]:
    return list(
        session.scalars(select(CapacityCell).where(CapacityCell.audit_id == audit_id).order_by(CapacityCell.position))
    )


def cell(session: Session, audit_id: str, position: int) -> CapacityCell | None:
    return session.scalar(
        select(CapacityCell).where(CapacityCell.audit_id == audit_id, CapacityCell.position == position)
    )


def texts(session: Session, audit_id: str) -> list[CapacityText]:
    return list(
        session.scalars(select(CapacityText).where(CapacityText.audit_id == audit_id).order_by(CapacityText.position))
    )


def texts_by_memorization(session: Session, audit_id: str, limit: int) -> list[CapacityText]:
    stmt = (
        select(CapacityText)
        .where(CapacityText.audit_id == audit_id)
        .order_by(CapacityText.memorized_bits.desc().nulls_last(), CapacityText.position)
        .limit(limit)
    )
    return list(session.scalars(stmt))


def update_cell(session: Session, audit_id: str, position: int, **values: Any) -> None:
    where = (CapacityCell.audit_id == audit_id, CapacityCell.position == position)
    session.execute(update(CapacityCell).where(*where).values(**values))


def update_text(session: Session, audit_id: str, position: int, **values: Any) -> None:
    where = (CapacityText.audit_id == audit_id, CapacityText.position == position)
    session.execute(update(CapacityText).where(*where).values(**values))
