"""Facts of a subject given by Wikidata id: from an imported dump when the person is there, else fetched from
the Wikidata API (``settings.wikidata_api_url``). Only catalog properties; values the catalog would refuse are
left out (they are Wikidata's data, not the caller's input). Errors name the id, never a fact."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.engine import session_scope
from app.db.models import Fact, Subject
from app.errors import InvalidInput, ServiceUnavailable
from app.settings import Settings
from app.wikidata import EntityNotFound, NotHuman, WikidataClient, WikidataUnavailable
from core.catalog import ValueProblem, load_catalog

FIELD = "subject.wikidata_id"


@dataclass(frozen=True)
class SourcedFacts:
    name: str
    facts: list[tuple[str, str]]  # (pid, value)
    source: str  # "dump" | "wikidata"


def imported_subject(session: Session, qid: str) -> Subject | None:
    """The subject a dump import stored for this id (owned by nobody), if any."""
    stmt = (
        select(Subject)
        .join(Fact, Fact.subject_id == Subject.id)
        .where(Subject.wikidata_id == qid, Subject.owner_key_id.is_(None), Fact.source == "dump")
        .order_by(Subject.id)
        .limit(1)
    )
    return session.scalars(stmt).first()


def fetch_facts(qid: str, settings: Settings) -> SourcedFacts:
    """Called before the request's transaction opens: the dump lookup runs in a short transaction of its own and
    the Wikidata call holds no database connection (a slow Wikidata must not starve the pool)."""
    with session_scope() as session:
        imported = imported_subject(session, qid)
        dumped = None if imported is None else (imported.name, [(f.property_id, f.value) for f in imported.facts])
    if dumped is not None:
        return _usable(SourcedFacts(dumped[0], dumped[1], "dump"), qid, settings)
    timeout = settings.wikidata_timeout_seconds
    try:
        with WikidataClient(settings.wikidata_api_url, timeout=timeout, retries=2, backoff=0.5) as client:
            subject = client.fetch_subject(qid)
    except NotHuman:
        message = f"Wikidata entity {qid} is not a human (instance of Q5); audits probe people"
        raise InvalidInput(FIELD, message) from None
    except EntityNotFound:
        raise InvalidInput(FIELD, "Wikidata has no entity with this id; check it") from None
    except WikidataUnavailable as exc:
        raise ServiceUnavailable(f"{exc}; retry later, or send the facts in the request", field=FIELD) from None
    return _usable(SourcedFacts(subject.name, list(subject.facts), "wikidata"), qid, settings)


def _usable(found: SourcedFacts, qid: str, settings: Settings) -> SourcedFacts:
    catalog = load_catalog()
    facts = []
    for pid, value in found.facts:
        value = " ".join(value.split())
        if pid not in catalog or len(value) > settings.max_value_length:
            continue
        try:
            facts.append((pid, catalog.get(pid).normalize(value)))
        except ValueProblem:
            continue
    facts = list(dict.fromkeys(facts))[: settings.max_facts_per_subject]
    if not facts:
        message = "Wikidata holds no facts about this entity for the catalog's properties (GET /properties)"
        raise InvalidInput(FIELD, message)
    return SourcedFacts(found.name, facts, found.source)
