"""Run Alembic migrations programmatically (all heads) and mirror the property catalog."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url

from app.db.engine import _prepare_sqlite
from app.settings import REPO_ROOT, get_settings


def alembic_config(url: str | None = None) -> Config:
    cfg = Config(str(REPO_ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(REPO_ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", (url or get_settings().database_url).replace("%", "%%"))
    return cfg


def migrate(url: str | None = None) -> None:
    target = url or get_settings().database_url
    if target.startswith("sqlite"):
        _prepare_sqlite(target)
    command.upgrade(alembic_config(make_url(target).render_as_string(hide_password=False)), "heads")
