"""The evidence record (app/evidence): an append-only, hash-chained, signed log of what was audited, exported,
verified and erased. It holds no personal data (a subject appears as a keyed hash only), has no foreign key to
the audits or subjects it speaks of, and so survives their erasure.

``payload`` is the entry's canonical JSON text, exactly as hashed and signed: stored as text (not JSON) so that
nothing the database does to numbers or key order can change what the hash covers."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base

BIG_ID = BigInteger().with_variant(Integer(), "sqlite")


class EvidenceEntry(Base):
    __tablename__ = "evidence_entries"

    seq: Mapped[int] = mapped_column(BIG_ID, primary_key=True, autoincrement=False)  # 1, 2, 3 … no gaps
    at: Mapped[datetime] = mapped_column(index=True)
    kind: Mapped[str] = mapped_column(String(32), index=True)  # app.evidence.schemas.EntryKind
    subject_ref: Mapped[str | None] = mapped_column(String(64), index=True)  # HMAC of the subject reference
    audit_id: Mapped[str | None] = mapped_column(String(32), index=True)  # no foreign key: survives erasure
    payload: Mapped[str] = mapped_column(Text)  # canonical JSON: what `hash` covers
    hash: Mapped[str] = mapped_column(String(64))  # SHA-256 of payload (it holds the previous entry's hash)
    key_id: Mapped[str] = mapped_column(String(16))  # which signing key (rotation)
    signature: Mapped[str] = mapped_column(String(128))  # Ed25519 over the hash, hex


class EvidenceHead(Base):
    """One row (id 1): the chain's last sequence number and hash. A writer updates it first, which locks it
    (Postgres: the row; SQLite: the database), so two writers can never extend the same entry."""

    __tablename__ = "evidence_head"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(BIG_ID)
    hash: Mapped[str] = mapped_column(String(64))
