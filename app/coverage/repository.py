"""Every query on datasets and coverage results.

Visibility follows audits: admin and regulator see every dataset, an auditor the datasets it uploaded,
anyone else none (404, never 403).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from sqlalchemy import Select, bindparam, delete, false, func, insert, select, text, update
from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.models import Audit, CoverageAudit, CoverageResult, Dataset, DatasetFile, DatasetRecord
from app.db.models.auth import Role

INSERT_BATCH = 2000


def visible(stmt: Select, principal: Principal) -> Select:
    if principal.sees_everything:
        return stmt
    if principal.role == Role.AUDITOR and principal.audit_scope is None:
        return stmt.where(Dataset.owner_key_id == principal.key_id)
    return stmt.where(false())


def get_visible(session: Session, principal: Principal, dataset_id: str) -> Dataset | None:
    return session.scalar(visible(select(Dataset).where(Dataset.id == dataset_id), principal))


def page(session: Session, principal: Principal, *, page: int, page_size: int) -> tuple[list[Dataset], int]:
    stmt = visible(select(Dataset), principal)
    total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    rows = session.scalars(
        stmt.order_by(Dataset.created_at.desc(), Dataset.id).offset((page - 1) * page_size).limit(page_size)
    )
    return list(rows), total


def files_of(session: Session, dataset_ids: Iterable[str]) -> dict[str, list[DatasetFile]]:
    ids = list(dataset_ids)
    out: dict[str, list[DatasetFile]] = {i: [] for i in ids}
    if ids:
        for f in session.scalars(select(DatasetFile).where(DatasetFile.dataset_id.in_(ids)).order_by(DatasetFile.id)):
            out[f.dataset_id].append(f)
    return out


def get_file(session: Session, dataset_id: str, target: str) -> DatasetFile | None:
    return session.scalar(select(DatasetFile).where(DatasetFile.dataset_id == dataset_id, DatasetFile.target == target))


def insert_records(session: Session, rows: Iterable[dict[str, Any]]) -> int:
    """Insert in batches so an upload never holds more than INSERT_BATCH records in memory."""
    count, batch = 0, []
    for row in rows:
        batch.append(row)
        if len(batch) >= INSERT_BATCH:
            session.execute(insert(DatasetRecord.__table__), batch)  # Core: no ORM bookkeeping per row
            count, batch = count + len(batch), []
    if batch:
        session.execute(insert(DatasetRecord.__table__), batch)
        count += len(batch)
    return count


POPULARITY_CHUNK = 50_000  # ids per UPDATE: a few statements even for a million distinct users


def set_popularity(session: Session, dataset_id: str, target: str, column: str, counts: Mapping[str, int]) -> None:
    """popularity = counts[record.<column>] for the target's records (0 stays for ids never counted).

    Postgres: one set-based UPDATE per POPULARITY_CHUNK ids (the counts as two arrays, joined by hash): one
    UPDATE per id took 35 s for a 3.8 MB upload's 200 items, as the just-inserted rows have no statistics yet and
    the planner scanned the dataset's rows once per id; nested loops are off for these statements for the same
    reason (a join planned on a 1-row estimate rescanned them once per id, minutes)."""
    items = list(counts.items())
    if session.get_bind().dialect.name != "postgresql":
        _set_popularity_each(session, dataset_id, target, column, items)
        return
    conn = session.connection()
    table = DatasetRecord.__table__
    stmt = text(
        f"UPDATE {table.name} AS r SET popularity = v.n"
        " FROM unnest(CAST(:ids AS text[]), CAST(:ns AS integer[])) AS v(id, n)"
        f" WHERE r.dataset_id = :dataset_id AND r.target = :target AND r.{table.c[column].name} = v.id"
    )
    previous = conn.execute(text("SELECT current_setting('enable_nestloop')")).scalar_one()
    conn.execute(text("SELECT set_config('enable_nestloop', 'off', true)"))
    for start in range(0, len(items), POPULARITY_CHUNK):
        chunk = items[start : start + POPULARITY_CHUNK]
        ids, ns = [k for k, _ in chunk], [n for _, n in chunk]
        conn.execute(stmt, {"ids": ids, "ns": ns, "dataset_id": dataset_id, "target": target})
    conn.execute(text("SELECT set_config('enable_nestloop', :previous, true)"), {"previous": previous})


def _set_popularity_each(session: Session, dataset_id: str, target: str, column: str, items: list) -> None:
    """SQLite (the embedded mode's one user): one UPDATE per id, by its index."""
    table = DatasetRecord.__table__
    stmt = (
        update(table)
        .where(table.c.dataset_id == dataset_id, table.c.target == target, table.c[column] == bindparam("b_id"))
        .values(popularity=bindparam("b_pop"))
    )
    params = [{"b_id": key, "b_pop": n} for key, n in items]
    for start in range(0, len(params), INSERT_BATCH):
        session.connection().execute(stmt, params[start : start + INSERT_BATCH])


def delete_dataset(session: Session, dataset: Dataset) -> int:
    """Delete a dataset; returns how many records went. Explicit deletes, so SQLite without foreign
    keys enforced would not leave personal data behind either."""
    record_ids = select(DatasetRecord.id).where(DatasetRecord.dataset_id == dataset.id)
    session.execute(delete(CoverageResult).where(CoverageResult.record_id.in_(record_ids)))
    n = session.execute(delete(DatasetRecord).where(DatasetRecord.dataset_id == dataset.id)).rowcount or 0
    session.execute(delete(DatasetFile).where(DatasetFile.dataset_id == dataset.id))
    session.execute(update(CoverageAudit).where(CoverageAudit.dataset_id == dataset.id).values(dataset_id=None))
    session.delete(dataset)
    return n


# -- coverage audits -----------------------------------------------------------------------------------------
def records_in_file_order(session: Session, dataset_id: str, target: str) -> Iterator[DatasetRecord]:
    stmt = (
        select(DatasetRecord)
        .where(DatasetRecord.dataset_id == dataset_id, DatasetRecord.target == target)
        .order_by(DatasetRecord.line_no)
        .execution_options(yield_per=INSERT_BATCH)
    )
    yield from session.scalars(stmt)


def interactions_by_user(session: Session, dataset_id: str) -> Iterator[DatasetRecord]:
    """Interactions grouped by user, each user's in time order (file order breaks ties)."""
    stmt = (
        select(DatasetRecord)
        .where(DatasetRecord.dataset_id == dataset_id, DatasetRecord.target == "interactions")
        .order_by(DatasetRecord.user_id, DatasetRecord.timestamp, DatasetRecord.line_no)
        .execution_options(yield_per=INSERT_BATCH)
    )
    yield from session.scalars(stmt)


def result_record_ids(session: Session, audit_id: str) -> set[int]:
    return set(session.scalars(select(CoverageResult.record_id).where(CoverageResult.audit_id == audit_id)))


def add_results(session: Session, rows: list[dict[str, Any]]) -> None:
    session.execute(insert(CoverageResult), rows)


def result_stats(session: Session, audit_id: str) -> list[tuple[int, bool, float, float]]:
    """(id, matched, popularity, char_ratio) of every stored outcome of an audit."""
    stmt = select(CoverageResult.id, CoverageResult.matched, CoverageResult.popularity, CoverageResult.char_ratio)
    return [tuple(r) for r in session.execute(stmt.where(CoverageResult.audit_id == audit_id))]


def set_buckets(session: Session, buckets: Mapping[int, int]) -> None:
    table = CoverageResult.__table__
    stmt = update(table).where(table.c.id == bindparam("b_id")).values(bucket=bindparam("b_bucket"))
    params = [{"b_id": i, "b_bucket": b} for i, b in buckets.items()]
    for start in range(0, len(params), INSERT_BATCH):
        session.connection().execute(stmt, params[start : start + INSERT_BATCH])


def results(
    session: Session, audit_id: str, matched: bool | None, limit: int | None = None
) -> Iterator[CoverageResult]:
    stmt = select(CoverageResult).where(CoverageResult.audit_id == audit_id)
    if matched is not None:
        stmt = stmt.where(CoverageResult.matched == matched)
    stmt = stmt.order_by(CoverageResult.line_no, CoverageResult.id)
    if limit is not None:
        yield from session.scalars(stmt.limit(limit))
        return
    yield from session.scalars(stmt.execution_options(yield_per=INSERT_BATCH))


def coverage_audits_of(session: Session, dataset_id: str, audit_filter) -> list[tuple[Audit, CoverageAudit]]:
    """Coverage audits of a dataset, newest first; ``audit_filter`` applies the caller's visibility."""
    stmt = audit_filter(select(Audit, CoverageAudit).join(CoverageAudit, CoverageAudit.audit_id == Audit.id))
    stmt = stmt.where(CoverageAudit.dataset_id == dataset_id).order_by(Audit.created_at.desc())
    return [(a, c) for a, c in session.execute(stmt)]


def lines_at(session: Session, dataset_id: str, target: str, line_nos: list[int]) -> list[str]:
    """The lines of these line numbers of one file, in file order."""
    stmt = (
        select(DatasetRecord.line)
        .where(
            DatasetRecord.dataset_id == dataset_id, DatasetRecord.target == target, DatasetRecord.line_no.in_(line_nos)
        )
        .order_by(DatasetRecord.line_no)
    )
    return list(session.scalars(stmt))


def first_interactions(session: Session, dataset_id: str, record_id: int, k: int) -> list[str]:
    """The first ``k`` interaction lines of the user of interaction ``record_id``, in the order of
    ``interactions_by_user`` (time, then file order): the examples of that user's probe prompt."""
    user = select(DatasetRecord.user_id).where(DatasetRecord.id == record_id).scalar_subquery()
    stmt = (
        select(DatasetRecord.line)
        .where(
            DatasetRecord.dataset_id == dataset_id,
            DatasetRecord.target == "interactions",
            DatasetRecord.user_id == user,
        )
        .order_by(DatasetRecord.timestamp, DatasetRecord.line_no)
        .limit(k)
    )
    return list(session.scalars(stmt))
