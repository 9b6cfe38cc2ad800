"""Subjects (data subjects) and their facts; the property catalog mirrored into the database."""

from __future__ import annotations

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.base import Base, CreatedAtMixin


class Subject(CreatedAtMixin, Base):
    """A person whose data is audited. ``name`` and every fact value are personal data:
    deleting the subject cascades to facts, audits and every result derived from them."""

    __tablename__ = "subjects"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    wikidata_id: Mapped[str | None] = mapped_column(String(20), index=True)
    owner_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"))

    facts: Mapped[list[Fact]] = relationship(
        back_populates="subject", cascade="all, delete-orphan", passive_deletes=True, order_by="Fact.id"
    )


class Fact(Base):
    """One (subject, property, value) triple; a multi-valued property has several rows."""

    __tablename__ = "facts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    subject_id: Mapped[int] = mapped_column(ForeignKey("subjects.id", ondelete="CASCADE"), index=True)
    property_id: Mapped[str] = mapped_column(ForeignKey("properties.pid"))
    value: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(20), default="request")  # request | wikidata | dump

    subject: Mapped[Subject] = relationship(back_populates="facts")


class PropertyRow(Base):
    """A property of the catalog (core.catalog), mirrored into the database when an audit first uses it."""

    __tablename__ = "properties"

    pid: Mapped[str] = mapped_column(String(16), primary_key=True)
    label: Mapped[str] = mapped_column(String(200))
    datatype: Mapped[str] = mapped_column(String(32))
    value_type: Mapped[str] = mapped_column(String(64))

    templates: Mapped[list[Template]] = relationship(cascade="all, delete-orphan", order_by="Template.index")


class Template(Base):
    __tablename__ = "templates"
    __table_args__ = (UniqueConstraint("property_id", "index"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    property_id: Mapped[str] = mapped_column(ForeignKey("properties.pid", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)  # 0 is the baseline
    text: Mapped[str] = mapped_column(Text)
