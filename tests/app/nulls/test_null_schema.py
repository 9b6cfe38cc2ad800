"""Migration 0007_null creates exactly the tables the models describe (on the embedded SQLite default)."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine


def test_migration_matches_the_null_models(tmp_path):
    from app.db.base import Base
    from app.migrate import migrate

    url = f"sqlite:///{tmp_path / 'schema.sqlite3'}"
    migrate(url)
    with create_engine(url).connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    ours = [d for d in diffs if "null_" in repr(d)]
    assert ours == [], ours
