"""What a subject's erasure must also forget of its verifications: the sentences of the held-out templates, scored
on both models, which none of the subject's audits holds (the audited templates' sentences are the audits' own)."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Subject
from app.db.models.verification import VerificationPerson
from app.subjects import repository as subjects
from core.catalog import load_catalog, split_template


def held_out_sentences(session: Session, subject: Subject) -> Iterator[str]:
    """Every held-out-template sentence a verification scored for ``subject`` (the subject and its look-alike names,
    each candidate value); the generic subject's name nobody and stay cached."""
    catalog = load_catalog()
    people = session.scalars(select(VerificationPerson).where(VerificationPerson.subject_id == subject.id))
    for person in people:
        if person.before_audit_id is None:
            continue
        results = {
            r.property_id: r for r in subjects.results_for_audit(session, person.before_audit_id, with_candidates=True)
        }
        for fact in person.facts:
            templates = ((fact.detail or {}).get("held_out_raw") or {}).get("templates") or []
            result = results.get(fact.property_id)
            canary = next((c for c in result.canaries if c.kind != "context"), None) if result else None
            if canary is None or fact.property_id not in catalog:
                continue
            prop = catalog.get(fact.property_id)
            for index in templates:
                for h in (subject.name, *canary.similar_names):
                    for cand in canary.candidates:
                        head, tail = split_template(prop.templates[index], h, cand.value)
                        yield head + tail
