"""Every query of the evidence record, and the one way to append to it (``append``): lock the head, chain,
hash, sign, insert, move the head, all in the caller's transaction (an entry commits with what it records)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models.evidence import EvidenceEntry, EvidenceHead
from app.evidence import chain
from app.evidence.keys import signing_key
from app.evidence.schemas import EntryKind
from app.settings import Settings

HEAD_ID = 1
EXPORT_MATCHES = 20  # export entries read when looking one up by its hash (the same bytes delivered again: newest)


def _lock_head(session: Session) -> tuple[int, str]:
    """Claim the next sequence number: an UPDATE first, which holds the head row (Postgres) or the database's
    write lock (SQLite) until the transaction ends, so a second writer waits and then reads this one's head;
    then read the head back (the previous hash, and the claimed number)."""
    claimed = session.execute(
        update(EvidenceHead).where(EvidenceHead.id == HEAD_ID).values(seq=EvidenceHead.seq + 1)
    ).rowcount
    if not claimed:  # a database made without the migration's head row (metadata.create_all): start the chain
        session.add(EvidenceHead(id=HEAD_ID, seq=1, hash=chain.GENESIS))
        session.flush()
    seq, prev = session.execute(select(EvidenceHead.seq, EvidenceHead.hash).where(EvidenceHead.id == HEAD_ID)).one()
    return seq, prev


def append(
    session: Session,
    settings: Settings,
    kind: str,
    *,
    principal: str,
    body: dict[str, Any],
    subject_id: int | None = None,
    audit_id: str | None = None,
) -> EvidenceEntry:
    """Append one entry (the caller commits). ``subject_id`` is kept as a keyed hash only; ``body`` must hold no
    personal data (names, fact values, prompts, canaries)."""
    private = signing_key(settings)
    seq, prev = _lock_head(session)
    at = utcnow()
    ref = chain.subject_ref(settings.key_pepper, subject_id) if subject_id is not None else None
    payload = chain.canonical(
        {
            "schema": chain.SCHEMA,
            "seq": seq,
            "prev": prev,
            "at": at.isoformat(),
            "kind": kind,
            "principal": principal[:64],
            "subject_ref": ref,
            "audit_id": audit_id,
            "body": body,
        }
    )
    digest = chain.digest(payload)
    entry = EvidenceEntry(
        seq=seq,
        at=at,
        kind=kind,
        subject_ref=ref,
        audit_id=audit_id,
        payload=payload,
        hash=digest,
        key_id=chain.key_id(private.public_key()),
        signature=chain.sign(private, digest),
    )
    session.add(entry)
    session.execute(update(EvidenceHead).where(EvidenceHead.id == HEAD_ID).values(hash=digest))
    session.flush()
    return entry


def entries(session: Session, *, after: int = 0, limit: int | None = None) -> Iterator[EvidenceEntry]:
    """Entries in chain order after sequence number ``after`` (streamed, never the whole table at once)."""
    stmt = select(EvidenceEntry).where(EvidenceEntry.seq > after).order_by(EvidenceEntry.seq)
    if limit is not None:
        stmt = stmt.limit(limit)
    yield from session.scalars(stmt.execution_options(yield_per=500))


def about(session: Session, ref: str, audit_id: str, limit: int) -> list[EvidenceEntry]:
    """Entries naming the subject (by ref) or the audit, oldest first."""
    match = or_(EvidenceEntry.subject_ref == ref, EvidenceEntry.audit_id == audit_id)
    return list(session.scalars(select(EvidenceEntry).where(match).order_by(EvidenceEntry.seq).limit(limit)))


def _exports_containing(session: Session, text: str, limit: int) -> Iterator[tuple[EvidenceEntry, dict[str, Any]]]:
    """The newest forget-set export entries whose payload contains ``text`` (at most ``limit``), each with its parsed
    payload: the text narrows the rows (an entry can be large: it lists up to 10,000 facts); the caller checks the
    parsed field it matched."""
    stmt = (
        select(EvidenceEntry)
        .where(EvidenceEntry.kind == EntryKind.FORGET_SET_EXPORT)
        .where(EvidenceEntry.payload.contains(text, autoescape=True))
        .order_by(EvidenceEntry.seq.desc())
        .limit(limit)
    )
    for entry in session.scalars(stmt):
        yield entry, json.loads(entry.payload)


def export_entry(session: Session, sha256: str) -> EvidenceEntry | None:
    """The newest forget-set export entry whose delivered bytes hash to ``sha256`` (64 lowercase hex digits, checked
    by the caller); the body's own "sha256" decides (a provenance block inside the body may name a file's hash)."""
    text = chain.canonical({"sha256": sha256})[1:-1]
    return next(
        (e for e, p in _exports_containing(session, text, EXPORT_MATCHES) if p["body"]["sha256"] == sha256), None
    )


def exports_of(session: Session, principal: str, limit: int) -> list[dict[str, Any]]:
    """The newest forget-set exports ``principal`` delivered (at most ``limit``): seq, time, format, records and the
    file's SHA-256, for the dashboard's verification form."""
    text = chain.canonical({"principal": principal})[1:-1]
    mine = ((e, p["body"]) for e, p in _exports_containing(session, text, limit) if p["principal"] == principal)
    return [
        {"seq": e.seq, "at": e.at, "format": b["format"], "records": b["records"], "sha256": b["sha256"]}
        for e, b in mine
    ]
