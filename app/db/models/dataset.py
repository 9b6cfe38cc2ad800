"""Datasets (uploaded recommendation data) and the per-record outcomes of coverage audits.

Deleting a dataset deletes its files, records and the coverage outcomes that quote its lines (they may
hold personal data, such as a user's zip code); the audits themselves keep their summary numbers.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from sqlalchemy import BigInteger, Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, CreatedAtMixin, JSONType

# BIGINT ids on Postgres (a ratings file has millions of lines); SQLite needs INTEGER for autoincrement.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def new_dataset_id() -> str:
    return uuid4().hex


class Dataset(CreatedAtMixin, Base):
    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_dataset_id)
    name: Mapped[str] = mapped_column(String(200))
    owner_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"), index=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0)


class DatasetFile(CreatedAtMixin, Base):
    """One file of a dataset (one per target), with its parse report."""

    __tablename__ = "dataset_files"
    __table_args__ = (UniqueConstraint("dataset_id", "target"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    target: Mapped[str] = mapped_column(String(16))  # items | users | interactions
    format: Mapped[str] = mapped_column(String(16))  # movielens | csv | tsv
    filename: Mapped[str] = mapped_column(String(300), default="")
    mapping: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    rows: Mapped[int] = mapped_column(Integer, default=0)
    malformed: Mapped[int] = mapped_column(Integer, default=0)
    unknown_references: Mapped[int] = mapped_column(Integer, default=0)
    problems: Mapped[list[Any]] = mapped_column(JSONType, default=list)  # [[line number, reason], ...]


class DatasetRecord(Base):
    """One well-formed line of a dataset file, in the file's own format, with its popularity.

    popularity: interactions of the item (items, and interactions by their item) or of the user (users).
    """

    __tablename__ = "dataset_records"
    __table_args__ = (
        Index("ix_dataset_records_file_line", "dataset_id", "target", "line_no"),
        Index("ix_dataset_records_key", "dataset_id", "target", "key"),
        Index("ix_dataset_records_item", "dataset_id", "target", "item_id"),
        Index("ix_dataset_records_history", "dataset_id", "target", "user_id", "timestamp"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    target: Mapped[str] = mapped_column(String(16))
    line_no: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str | None] = mapped_column(String(200))
    item_id: Mapped[str | None] = mapped_column(String(200))
    timestamp: Mapped[int | None] = mapped_column(BigInteger)
    line: Mapped[str] = mapped_column(Text)
    popularity: Mapped[int] = mapped_column(Integer, default=0)


class CoverageAudit(Base):
    """Which dataset file a coverage audit probes (the audit row holds model, options, status, summary)."""

    __tablename__ = "coverage_audits"

    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), primary_key=True)
    dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"), index=True)
    target: Mapped[str] = mapped_column(String(16))


class CoverageResult(Base):
    """The outcome for one probed record: what the model generated, exact match, fuzzy ratio, bucket."""

    __tablename__ = "coverage_results"
    __table_args__ = (UniqueConstraint("audit_id", "record_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    audit_id: Mapped[str] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), index=True)
    record_id: Mapped[int] = mapped_column(BigId, ForeignKey("dataset_records.id", ondelete="CASCADE"), index=True)
    line_no: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(200))
    expected: Mapped[str] = mapped_column(Text)
    generated: Mapped[str] = mapped_column(Text)
    matched: Mapped[bool] = mapped_column(Boolean)
    char_ratio: Mapped[float] = mapped_column(Float)
    popularity: Mapped[float] = mapped_column(Float, default=0.0)
    bucket: Mapped[int | None] = mapped_column(Integer)
