"""Run Alembic migrations programmatically (all heads) and mirror the property catalog."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from app.db.engine import _prepare_sqlite
from app.settings import REPO_ROOT, get_settings


def alembic_config(url: str | None = None) -> Config:
    cfg = Config(str(REPO_ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(REPO_ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", (url or get_settings().database_url).replace("%", "%%"))
    return cfg


def migrate(url: str | None = None) -> tuple[set[str], set[str]]:
    """Upgrade the database to every head; returns its revisions before and after (before empty: it was created)."""
    target = url or get_settings().database_url
    if target.startswith("sqlite"):
        _prepare_sqlite(target)
    plain = make_url(target).render_as_string(hide_password=False)
    before = revisions(plain)
    command.upgrade(alembic_config(plain), "heads")
    return before, revisions(plain)


def revisions(url: str) -> set[str]:
    """The schema revisions the database is at (none: a new, empty database)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return set(MigrationContext.configure(connection).get_current_heads())
    finally:
        engine.dispose()


def import_shipped_nulls() -> list[str]:
    """The shipped nulls this deployment's first submissions would import, imported now (app.nulls.service): at
    `memaudit migrate`, when an embedded database is created and when `memaudit serve` starts. Returns the models."""
    from app.db.engine import session_scope
    from app.nulls.service import import_shipped_nulls as import_them

    with session_scope() as session:
        return import_them(session, get_settings())
