"""Engine and session factory; one per database URL per process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from app.settings import get_settings


def _prepare_sqlite(url: str) -> None:
    path = url.removeprefix("sqlite:///")
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)


@lru_cache
def engine_for(url: str) -> Engine:
    # hide_parameters: a database error's text would otherwise carry the bound values (names, facts) into logs.
    if url.startswith("sqlite"):
        _prepare_sqlite(url)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, hide_parameters=True)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record) -> None:
            # Foreign keys make ON DELETE CASCADE erase personal data; WAL lets the worker thread
            # write progress while the API reads.
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=10, hide_parameters=True)


def get_engine() -> Engine:
    """The engine of the configured database (maintenance statements such as VACUUM run on it)."""
    return engine_for(get_settings().database_url)


@lru_cache
def _factory(url: str) -> sessionmaker[Session]:
    return sessionmaker(bind=engine_for(url), expire_on_commit=False)


def session_factory() -> sessionmaker[Session]:
    return _factory(get_settings().database_url)


@contextmanager
def session_scope() -> Iterator[Session]:
    """A unit of work outside a request: commit on success, roll back on error."""
    session = session_factory()()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
