"""Issue 44, item 1: a dataset's popularity is written by a few set-based statements, not one UPDATE per id.

One UPDATE per item or user (an executemany of thousands of parameter sets) took 35 s of a 3.8 MB upload's
48 s on real Postgres (the just-inserted rows have no statistics yet, so each id's UPDATE rescanned the dataset's
rows); 12 such uploads by one auditor took minutes each. Real Postgres, the real ingest."""

from __future__ import annotations

import io
from collections import Counter

from sqlalchemy import event, select

from app.auth.keys import Principal
from app.coverage import service
from app.db.engine import get_engine, session_scope
from app.db.models import DatasetRecord
from app.settings import get_settings


def _files() -> tuple[bytes, bytes, bytes, list[tuple[int, int]]]:
    """300 items (the last 20 never rated), 250 users, 3,000 ratings."""
    items = "".join(f"{i}::Movie {i} (1995)::Drama\n" for i in range(1, 301)).encode()
    users = "".join(f"{u}::F::25::10::48067\n" for u in range(1, 251)).encode()
    pairs = [(1 + (i * 7) % 250, 1 + (i * 13) % 280) for i in range(3000)]
    ratings = "".join(f"{u}::{m}::4::{978300760 + i}\n" for i, (u, m) in enumerate(pairs)).encode()
    return items, users, ratings, pairs


def test_popularity_is_set_by_a_few_statements_with_the_same_counts(pg_env):
    items, users, ratings, pairs = _files()
    sources = [
        service.SourceFile("items", "movies.dat", io.BytesIO(items), len(items)),
        service.SourceFile("users", "users.dat", io.BytesIO(users), len(users)),
        service.SourceFile("interactions", "ratings.dat", io.BytesIO(ratings), len(ratings)),
    ]
    updates: list[tuple[bool, int]] = []  # (executemany, parameter sets) of each UPDATE sent

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
        if statement.lstrip().upper().startswith("UPDATE DATASET_RECORDS"):
            updates.append((executemany, len(parameters) if executemany else 1))

    engine = get_engine()
    event.listen(engine, "before_cursor_execute", seen)
    try:
        with session_scope() as session:
            principal = Principal(id="key:test", role="auditor")
            dataset_id = service.ingest(session, get_settings(), principal, "popular", sources).id
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    # items, users, interactions: one statement each (was: 3 executemanys of 280 + 250 + 280 parameter sets)
    assert updates == [(False, 1)] * 3, updates

    by_item, by_user = Counter(str(m) for _, m in pairs), Counter(str(u) for u, _ in pairs)
    with session_scope() as session:
        rows = session.execute(
            select(DatasetRecord.target, DatasetRecord.key, DatasetRecord.item_id, DatasetRecord.popularity).where(
                DatasetRecord.dataset_id == dataset_id
            )
        ).all()
    want = {"items": lambda key, item: by_item[key], "users": lambda key, item: by_user[key]}
    want["interactions"] = lambda key, item: by_item[item]
    assert len(rows) == 300 + 250 + 3000
    assert all(pop == want[target](key, item) for target, key, item, pop in rows)
    assert sum(1 for target, _, _, pop in rows if target == "items" and pop == 0) == 20  # never rated: 0 stays
