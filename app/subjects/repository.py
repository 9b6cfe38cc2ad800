"""Queries on subjects, facts and subject-audit results."""

from __future__ import annotations

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session, selectinload

from app.db.models import Audit, Canary, Fact, FactResult, Subject


def delete_results(session: Session, audit_id: str) -> None:
    session.execute(delete(FactResult).where(FactResult.audit_id == audit_id))


def facts_by_id(session: Session, ids: list[int]) -> dict[int, Fact]:
    return {f.id: f for f in session.scalars(select(Fact).where(Fact.id.in_(ids)))} if ids else {}


def results_for_audit(session: Session, audit_id: str, with_candidates: bool) -> list[FactResult]:
    load = selectinload(FactResult.canaries)
    if with_candidates:
        load = load.selectinload(Canary.candidates)
    stmt = (
        select(FactResult)
        .where(FactResult.audit_id == audit_id)
        .options(load, selectinload(FactResult.counterfactuals))
        .order_by(FactResult.id)
    )
    return list(session.scalars(stmt))


def audits_of_subject(session: Session, subject_id: int) -> list[Audit]:
    return list(session.scalars(select(Audit).where(Audit.subject_id == subject_id)))


def get_subject(session: Session, subject_id: int) -> Subject | None:
    return session.get(Subject, subject_id)


SAME_SUBJECT_CANDIDATES = 20  # bounds the facts compared when looking for a subject to reuse


def same_subject(
    session: Session, owner_key_id: int, name: str, wikidata_id: str | None, facts: list[tuple[str, str, str]]
) -> Subject | None:
    """The owner's stored subject with exactly this name, Wikidata id and facts (property, value, source), if any."""
    wanted = sorted(facts)
    stmt = (
        select(Subject)
        .where(
            Subject.owner_key_id == owner_key_id,
            Subject.name == name,
            Subject.wikidata_id == wikidata_id if wikidata_id is not None else Subject.wikidata_id.is_(None),
        )
        .order_by(Subject.id.desc())
        .limit(SAME_SUBJECT_CANDIDATES)
    )
    for subject in session.scalars(stmt):
        if sorted((f.property_id, f.value, f.source) for f in subject.facts) == wanted:
            return subject
    return None


BULK_CHUNK = 2000  # rows per INSERT statement when a batch creates subjects in bulk


def insert_subjects(session: Session, rows: list[dict[str, object]]) -> list[int]:
    """Insert subjects (dicts of name, wikidata_id, owner_key_id, created_at) in bulk; their ids, in order."""
    ids: list[int] = []
    for i in range(0, len(rows), BULK_CHUNK):
        stmt = insert(Subject).returning(Subject.id, sort_by_parameter_order=True)
        ids.extend(session.scalars(stmt, rows[i : i + BULK_CHUNK]))
    return ids


def insert_facts(session: Session, rows: list[dict[str, object]]) -> None:
    """Insert facts (dicts of subject_id, property_id, value, source) in bulk."""
    for i in range(0, len(rows), BULK_CHUNK):
        session.execute(insert(Fact), rows[i : i + BULK_CHUNK])


def namesakes_with_value(
    session: Session, owner_key_id: int, subject_id: int, property_id: str, value: str
) -> list[str]:
    """Names of the owner's other stored subjects holding ``value`` (case-folded) for ``property_id``: one owner's
    data only (app.subjects.namesakes compares their name parts)."""
    stmt = (
        select(Subject.name)
        .join(Fact, Fact.subject_id == Subject.id)
        .where(
            Subject.owner_key_id == owner_key_id,
            Subject.id != subject_id,
            Fact.property_id == property_id,
            func.lower(Fact.value) == value.lower(),
        )
        .distinct()
    )
    return list(session.scalars(stmt))
