"""Erasure beyond the subject's rows: idempotency keys (a client may have chosen one that holds a name), job
records in Redis, an access-log entry, an `erased` entry in the evidence record (which keeps no personal data and
outlives the erasure: app/evidence), and optionally a VACUUM of the touched tables (Postgres).

Deleted rows are logically gone at commit. Their bytes stay in Postgres heap and index pages until the space is
reused (plain VACUUM marks it reusable; VACUUM FULL rewrites the tables into new files, under an exclusive lock
that blocks the service meanwhile), in the write-ahead log until its segments are recycled, in WAL archives,
replicas' histories and backups until those are rotated, and in SQLite's free pages until reused.
docs/reliability.md "Erasure" says what an operator must do about each."""

from __future__ import annotations

import logging

from sqlalchemy import delete, select, text, update
from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.engine import get_engine
from app.db.models import IdempotencyKey
from app.db.models.requests import Delivery, PersonRequest, RequestAudit
from app.evidence import service as evidence
from app.privacy import access_log
from app.queue import get_dispatcher
from app.settings import Settings
from app.subjects import repository as subjects_repository
from app.subjects import service as subjects

log = logging.getLogger("memaudit.erasure")

# Every table an erasure deletes from (directly or by cascade): what VACUUM visits afterwards.
TOUCHED_TABLES = (
    "subjects",
    "facts",
    "audits",
    "idempotency_keys",
    "fact_results",
    "canaries",
    "candidate_scores",
    "counterfactual_values",
    "nll_cache",
    "revoked_subject_tokens",
    "requests",
    "deliveries",
)
ERASED_NAME = "(erased)"  # what a person's request says of its subject once the subject is erased


def erase(
    session: Session, settings: Settings, principal: Principal, subject_id: int, *, vacuum_after: bool = True
) -> dict[str, int]:
    """Erase a subject (see app.subjects.service.erase_subject) and what refers to it outside its rows.
    Commits: the job records and the VACUUM come after the erasure is durable."""
    audit_ids = [a.id for a in subjects_repository.audits_of_subject(session, subject_id)]
    # Explicitly, not only by cascade, and before erase_subject: if it refuses (403/404), all of this rolls back.
    keys = session.execute(delete(IdempotencyKey).where(IdempotencyKey.audit_id.in_(audit_ids))).rowcount or 0
    requests = _scrub_requests(session, audit_ids)  # before the audits go: their request links are what find them
    counts = subjects.erase_subject(session, principal, subject_id)
    access_log.record(session, principal, "erase_subject", subject_id=subject_id)
    evidence.record_erasure(session, settings, principal, subject_id, audit_ids, counts | {"idempotency_keys": keys})
    session.commit()
    jobs = get_dispatcher().discard(audit_ids) if audit_ids else 0
    if vacuum_after:
        vacuum(settings)
    return counts | {"idempotency_keys": keys, "job_records": jobs, "requests_scrubbed": requests}


def vacuum(settings: Settings) -> bool:
    """VACUUM (or VACUUM FULL) the tables an erasure touches, if configured and on Postgres."""
    if settings.erasure_vacuum == "off" or not settings.database_url.startswith("postgresql"):
        return False
    full = "FULL " if settings.erasure_vacuum == "full" else ""
    with get_engine().connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"VACUUM {full}{', '.join(TOUCHED_TABLES)}"))  # constant table names only
    log.info("vacuumed %d tables after an erasure (%s)", len(TOUCHED_TABLES), settings.erasure_vacuum)
    return True


def _scrub_requests(session: Session, audit_ids: list[str]) -> int:
    """The person's requests (app/requests) that audited this subject keep their dates, rights, states and
    delivery hashes, what an authority checks later, but lose the name, the Wikidata id, the facts and the delivered
    files' contents. A request that never audited the subject is not linked to it and is not found here."""
    if not audit_ids:
        return 0
    ids = list(session.scalars(select(RequestAudit.request_id).where(RequestAudit.audit_id.in_(audit_ids)).distinct()))
    if ids:
        values = {"subject_name": ERASED_NAME, "wikidata_id": None, "facts": []}
        session.execute(update(PersonRequest).where(PersonRequest.id.in_(ids)).values(**values))
        session.execute(update(Delivery).where(Delivery.request_id.in_(ids)).values(content=""))
    return len(ids)
