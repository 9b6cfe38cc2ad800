"""The evidence record's uses: export the chain (with a signed end line), the public key, an entry per forget
set delivered and per erasure, and what the record says about one subject (for the person's page).

Bodies hold ids, counts, p-values, hashes and provenance only: never a name, a fact value, a prompt or a
canary sentence. A subject appears as ``subject_ref`` (HMAC of its id under the key pepper)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.engine import session_scope
from app.db.models.evidence import EvidenceEntry
from app.evidence import chain, repository
from app.evidence.keys import signing_key
from app.evidence.schemas import EntryKind, PublicKey
from app.settings import Settings

MAX_REFS = 10_000  # subject refs, audit ids and facts named in one export's entry (more are counted, not listed)
MAX_P_VALUES = 1_000  # p-values listed per property in one export's entry
MAX_PROVENANCE = 20  # distinct provenance blocks listed in one export's entry
PERSON_ENTRIES = 200  # entries the person's page reads


def export_lines(session: Session, settings: Settings) -> Iterator[str]:
    """The whole chain as JSON lines in order, then the end line ``{"_end": {...}}`` signed now: it states the
    count and the last hash, so a file missing its last entries fails verification."""
    n, head = 0, chain.GENESIS
    for e in repository.entries(session):
        n, head = n + 1, e.hash
        row = {"seq": e.seq, "payload": e.payload, "hash": e.hash, "key_id": e.key_id, "signature": e.signature}
        yield json.dumps(row, ensure_ascii=False) + "\n"
    private = signing_key(settings)
    end = {
        "schema": chain.SCHEMA,
        "entries": n,
        "head": head,
        "key_id": chain.key_id(private.public_key()),
        "signature": chain.sign(private, chain.end_statement(n, head)),
    }
    yield json.dumps({chain.END_KEY: end}) + "\n"


def public_key(settings: Settings) -> PublicKey:
    public = signing_key(settings).public_key()
    return PublicKey(key_id=chain.key_id(public), pem=chain.public_pem(public))


def record_erasure(
    session: Session,
    settings: Settings,
    principal: Principal,
    subject_id: int,
    audit_ids: list[str],
    counts: dict[str, int],
) -> EvidenceEntry:
    """In the erasure's own transaction: the entry commits with the erasure, or neither does."""
    body = {"audits": sorted(audit_ids)[:MAX_REFS], "audits_erased": len(audit_ids), "rows_deleted": counts}
    return repository.append(
        session, settings, EntryKind.ERASED, principal=principal.id, body=body, subject_id=subject_id
    )


class ExportWitness:
    """Watches a forget-set export go out and, once the last byte has been handed over, appends its entry: the
    SHA-256 of the exact bytes delivered (the pipeline can hash its file and compare), the filters, per property
    the records and their p-values, the subjects (as refs), audits, the facts ([audit id, property(, templates)])
    and provenance. A stream cut short or left by
    the client records no delivery (the access log still records what was read)."""

    def __init__(
        self,
        settings: Settings,
        principal: Principal,
        fmt: str,
        filters: dict[str, Any],
        kind: EntryKind = EntryKind.FORGET_SET_EXPORT,
    ) -> None:
        self.settings, self.principal, self.fmt, self.kind = settings, principal, fmt, kind
        # ids, property ids and thresholds (no personal data); a subject filter appears as its ref, like subjects
        self.filters = {k: v for k, v in filters.items() if k != "subject_id"}
        if filters.get("subject_id") is not None:
            self.filters["subject_ref"] = chain.subject_ref(settings.key_pepper, filters["subject_id"])
        self.subjects: set[int] = set()
        self.audits: set[str] = set()
        self.properties: dict[str, dict[str, Any]] = {}
        self.provenance: dict[str, dict[str, Any]] = {}
        # the facts delivered, as [audit id, property] or, where the format exposes templates (tofu), [audit id,
        # property, templates]: what a verification by export reference re-reads (people.export_sha256)
        self.facts: list[list[Any]] = []

    def tap(self, rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            self.subjects.add(row["subject_id"])
            self.audits.add(row["audit_id"])
            prop = self.properties.setdefault(row["property"], {"records": 0, "p_values": []})
            prop["records"] += 1
            if len(self.facts) < MAX_REFS:
                fact = [row["audit_id"], row["property"]]
                self.facts.append(fact + [row["templates"]] if row.get("templates") is not None else fact)
            if len(prop["p_values"]) < MAX_P_VALUES:
                prop["p_values"].append(row.get("p_value"))
            block = row.get("provenance")
            if block is not None and len(self.provenance) < MAX_PROVENANCE:
                stripped = {k: v for k, v in block.items() if k != "nulls"}  # nulls: per record, in p_values' stead
                self.provenance.setdefault(chain.digest(chain.canonical(stripped)), stripped)
            yield row

    def seal(self, chunks: Iterator[str]) -> Iterator[str]:
        sha = hashlib.sha256()
        size = 0
        for chunk in chunks:
            data = chunk.encode()
            sha.update(data)
            size += len(data)
            yield chunk
        with session_scope() as s:
            self._append(s, sha.hexdigest(), size)

    def _append(self, session: Session, digest: str, size: int) -> None:
        subjects = sorted(self.subjects)
        refs = [chain.subject_ref(self.settings.key_pepper, sid) for sid in subjects[:MAX_REFS]]
        body = {
            "format": self.fmt,
            "filters": self.filters,
            "sha256": digest,
            "bytes": size,
            "records": sum(p["records"] for p in self.properties.values()),
            "properties": dict(sorted(self.properties.items())),
            "subjects": len(subjects),
            "subject_refs": refs,
            "audits": sorted(self.audits)[:MAX_REFS],
            "provenance": list(self.provenance.values()),
            "facts": self.facts,  # every record's fact when records <= MAX_REFS (a verification can name the export)
        }
        one_subject = subjects[0] if len(subjects) == 1 else None
        one_audit = next(iter(self.audits)) if len(self.audits) == 1 else None
        repository.append(
            session,
            self.settings,
            self.kind,
            principal=self.principal.id,
            body=body,
            subject_id=one_subject,
            audit_id=one_audit,
        )


def about(session: Session, settings: Settings, subject_id: int, audit_id: str) -> list[dict[str, Any]]:
    """The entries about one subject or one of their audits, parsed (the person's page)."""
    ref = chain.subject_ref(settings.key_pepper, subject_id)
    rows = repository.about(session, ref, audit_id, PERSON_ENTRIES)
    return [json.loads(r.payload) for r in rows]
