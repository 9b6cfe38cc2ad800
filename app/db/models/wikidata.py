"""WikiMem's Wikidata dump imports: the import's checkpoint (resumable), property metadata, and the
counterfactual pools built from the dump (every distinct value of each property used by >= 100 humans)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, CreatedAtMixin, JSONType
from app.db.vocabulary import ImportStatus


class WikidataImport(CreatedAtMixin, Base):
    """One run of `memaudit import-wikidata` over one dump file. Humans are stored in batches; each batch
    commits together with ``last_line``, so an interrupted import resumes after its last complete batch."""

    __tablename__ = "wikidata_imports"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    path: Mapped[str] = mapped_column(String(1000))
    fingerprint: Mapped[str] = mapped_column(String(64), index=True)  # file name, size and mtime
    status: Mapped[str] = mapped_column(String(16), default=ImportStatus.RUNNING)
    last_line: Mapped[int] = mapped_column(Integer, default=0)
    humans: Mapped[int] = mapped_column(Integer, default=0)
    facts: Mapped[int] = mapped_column(Integer, default=0)
    skipped_humans: Mapped[int] = mapped_column(Integer, default=0)  # no usable fact, or already imported
    bad_lines: Mapped[int] = mapped_column(Integer, default=0)
    bad_line_numbers: Mapped[list[int]] = mapped_column(JSONType, default=list)
    truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)


class WikidataProperty(Base):
    """Property metadata as the dump states it (label, description, aliases, datatype)."""

    __tablename__ = "wikidata_properties"

    pid: Mapped[str] = mapped_column(String(16), primary_key=True)
    label: Mapped[str] = mapped_column(String(300))
    description: Mapped[str] = mapped_column(Text, default="")
    aliases: Mapped[list[Any]] = mapped_column(JSONType, default=list)
    datatype: Mapped[str] = mapped_column(String(32))
    import_id: Mapped[int | None] = mapped_column(ForeignKey("wikidata_imports.id", ondelete="SET NULL"))


class PoolValue(Base):
    """One value of a property's dump-built counterfactual pool, most frequent first (``position``)."""

    __tablename__ = "pool_values"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    import_id: Mapped[int] = mapped_column(ForeignKey("wikidata_imports.id", ondelete="CASCADE"), index=True)
    property_id: Mapped[str] = mapped_column(String(16), index=True)
    position: Mapped[int] = mapped_column(Integer)
    value: Mapped[str] = mapped_column(Text)
    humans: Mapped[int] = mapped_column(Integer)  # how many humans hold this value
