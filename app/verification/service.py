"""Verification use cases: validate a verification (the people, their before audits, the models), create its
people and the after model's nulls at submission, and read its results.

Each person's before audit is a stored subject audit of the before model (the newest succeeded one, or the one a
forget-set record names); the job redoes it on the after model with that audit's stored options (templates,
counterfactual draws, look-alikes, seed). The after model's nulls are created here, in the submission's
transaction (a read never creates one)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from app.audits import repository as audits
from app.audits.service import check_model, visible_audit_of_kind
from app.auth.keys import Principal
from app.batches import repository as batches
from app.db.models import Audit, Subject
from app.db.models.audit import AuditStatus
from app.db.models.auth import ApiKey, Role
from app.db.models.evidence import EvidenceEntry
from app.db.models.verification import VerificationPerson
from app.errors import InvalidInput
from app.evidence import repository as evidence
from app.evidence.service import MAX_REFS
from app.nulls.config import subject_lookalikes
from app.nulls.service import ensure_nulls
from app.settings import Settings
from app.subjects import repository as subjects
from app.verification import repository
from app.verification.schemas import (
    MAX_PEOPLE,
    MAX_RECORDS,
    SOURCES,
    ContextRead,
    ExportRef,
    FactStatus,
    HeldOutRead,
    PersonRole,
    RelearningRead,
    Side,
    VerificationAuditCreate,
    VerificationFactRead,
    VerificationPage,
)
from core.catalog import load_catalog

NEIGHBOUR_SCAN = 50_000  # subjects read, at most, to find a verification's name neighbours
NO_BEFORE = (
    "no succeeded subject audit of this person on the before model that you may see: audit them on it first"
    " (POST /audits, kind subject), or name their audit in the record's audit_id"
)


@dataclass
class _Person:
    subject_id: int
    field: str  # where it came from in the request (for errors)
    role: PersonRole
    audit_id: str | None = None
    targets: set[str] = field(default_factory=set)
    exposed: dict[str, set[int]] = field(default_factory=dict)
    name_neighbour: bool = False  # added by locality.name_neighbours


def stored_options(body: VerificationAuditCreate) -> dict[str, Any]:
    people = body.people
    source = {"forget_set": "forget_set", "export_sha256": "export", "batch_id": "batch", "subject_ids": "subjects"}[
        next(n for n in SOURCES if getattr(people, n) is not None)
    ]
    relearning = body.options.relearning.model_dump(mode="json") if body.options.relearning else None
    return body.options.model_dump(mode="json", exclude={"relearning"}) | {
        "before": body.before,
        "source": source,
        "relearning": relearning,
    }


def _owner(session: Session, audit: Audit) -> Principal:
    key = session.get(ApiKey, audit.owner_key_id) if audit.owner_key_id is not None else None
    role = key.role if key is not None else Role.ADMIN
    return Principal(id=f"key:{audit.owner_key_id}", role=role, key_id=audit.owner_key_id)


def _add_record(
    people: dict[int, _Person],
    where: str,
    subject_id: int,
    audit_id: str | None,
    prop: str,
    templates: list[int] | None,
) -> None:
    person = people.setdefault(subject_id, _Person(subject_id, where, PersonRole.FORGOTTEN))
    if audit_id is not None:
        if person.audit_id not in (None, audit_id):
            raise InvalidInput(f"{where}.audit_id", "a person's records name two audits; give one per person")
        person.audit_id = audit_id
    person.targets.add(prop)
    if templates is not None:
        person.exposed.setdefault(prop, set()).update(templates)


def _export_facts(session: Session, principal: Principal, sha256: str) -> tuple[EvidenceEntry, list[list[Any]]]:
    """The facts a forget-set export of the caller's delivered, from its evidence entry (an admin may name anyone's;
    another principal's export reads as absent)."""
    where = "people.export_sha256"
    entry = evidence.export_entry(session, sha256)
    payload = json.loads(entry.payload) if entry is not None else None
    if payload is None or (principal.role != Role.ADMIN and payload["principal"] != principal.id):
        raise InvalidInput(
            where,
            "no forget-set export of yours delivered a file with this SHA-256; hash the file"
            " `memaudit export` or GET /forget-set wrote (sha256sum FILE), or send its records",
        )
    body = payload["body"]
    facts = body.get("facts")
    if facts is None or len(facts) < body.get("records", 0):
        raise InvalidInput(
            where,
            "this export's entry does not list every fact it delivered (an older export, or"
            f" one over {MAX_REFS:,} facts); send the file's records as people.forget_set",
        )
    if len(facts) > MAX_RECORDS:
        raise InvalidInput(
            where,
            f"the export holds more than {MAX_RECORDS} facts; verify it in parts"
            " (people.forget_set) or by people.batch_id",
        )
    if not facts:
        raise InvalidInput(where, "the export delivered no fact; there is nothing to verify")
    return entry, facts


def _forgotten(
    session: Session, body: VerificationAuditCreate, principal: Principal, audit: Audit
) -> dict[int, _Person]:
    people: dict[int, _Person] = {}
    given = body.people
    if given.forget_set is not None:
        for i, record in enumerate(given.forget_set):
            where = f"people.forget_set[{i}]"
            _add_record(people, where, record.subject_id, record.audit_id, record.property, record.templates)
    elif given.export_sha256 is not None:
        entry, facts = _export_facts(session, principal, given.export_sha256)
        seen: dict[str, Audit | None] = {}  # an audit's facts come together: one read per audit
        for audit_id, prop, *templates in facts:
            if audit_id not in seen:
                seen[audit_id] = audits.get_visible(session, principal, audit_id)
            before = seen[audit_id]
            if before is None or before.subject_id is None:
                raise InvalidInput(
                    "people.export_sha256",
                    "an audit this export came from is gone (erased) or no longer yours to read; send the records"
                    " of the people still to verify as people.forget_set",
                )
            _add_record(
                people, "people.export_sha256", before.subject_id, audit_id, prop, templates[0] if templates else None
            )
        audit.options = {**(audit.options or {}), "export": {"seq": entry.seq, "sha256": given.export_sha256}}
    elif given.batch_id is not None:
        if batches.get_visible(session, principal, given.batch_id) is None:
            raise InvalidInput("people.batch_id", "no batch with this id among those you may see")
        for sid in repository.batch_subjects(session, given.batch_id, body.before, MAX_PEOPLE + 1):
            people[sid] = _Person(sid, "people.batch_id", PersonRole.FORGOTTEN)
        if not people:
            raise InvalidInput("people.batch_id", "the batch has no audits on the before model; name that model")
    else:
        for i, sid in enumerate(given.subject_ids or []):
            people.setdefault(sid, _Person(sid, f"people.subject_ids[{i}]", PersonRole.FORGOTTEN))
    if not people:
        raise InvalidInput("people", "no one to verify: give at least one record or subject")
    return people


def name_parts(name: str) -> set[str]:
    """A name's parts as name neighbours share them: words split at spaces and hyphens, case-folded, initials
    (one letter, with or without a dot) left out."""
    parts = (p.strip(".,'’").casefold() for p in name.replace("-", " ").split())
    return {p for p in parts if len(p) > 1}


def _name_neighbours(
    session: Session, body: VerificationAuditCreate, principal: Principal, forgotten: dict[int, _Person], n: int
) -> list[int]:
    """Up to ``n`` people the caller may see, audited on the before model, who share a name part with a forgotten
    person (newest first; at most NEIGHBOUR_SCAN subjects are read). Names are compared here, never stored, logged
    or returned."""
    parts: set[str] = set()
    for sid in forgotten:
        subject = session.get(Subject, sid)
        if subject is not None:
            parts |= name_parts(subject.name)
    found = []
    for sid, name in repository.audited_subjects(session, principal, body.before, NEIGHBOUR_SCAN):
        if sid not in forgotten and parts & name_parts(name):
            found.append(sid)
            if len(found) == n:
                break
    return found


def _locality(
    session: Session, body: VerificationAuditCreate, principal: Principal, forgotten: dict[int, _Person]
) -> dict[int, _Person]:
    out: dict[int, _Person] = {}
    if body.locality.name_neighbours:
        for sid in _name_neighbours(session, body, principal, forgotten, body.locality.name_neighbours):
            out[sid] = _Person(sid, "locality.name_neighbours", PersonRole.LOCALITY, name_neighbour=True)
    for i, sid in enumerate(body.locality.subject_ids):
        if sid not in forgotten:
            out.setdefault(sid, _Person(sid, f"locality.subject_ids[{i}]", PersonRole.LOCALITY))
    if body.locality.batch_id is not None:
        if batches.get_visible(session, principal, body.locality.batch_id) is None:
            raise InvalidInput("locality.batch_id", "no batch with this id among those you may see")
        for sid in repository.batch_subjects(session, body.locality.batch_id, body.before, MAX_PEOPLE + 1):
            if sid not in forgotten:
                out.setdefault(sid, _Person(sid, "locality.batch_id", PersonRole.LOCALITY))
    return out


def _before_audit(session: Session, principal: Principal, person: _Person, before: str) -> Audit:
    if person.audit_id is not None:
        audit = audits.get_visible(session, principal, person.audit_id)  # another's audit reads as absent
        if audit is None or audit.kind != "subject" or audit.subject_id != person.subject_id:
            raise InvalidInput(f"{person.field}.audit_id", "no subject audit of this person with this id")
        if audit.model != before or audit.status != AuditStatus.SUCCEEDED:
            raise InvalidInput(
                f"{person.field}.audit_id", "the audit is not a succeeded audit of the before model; name that model"
            )
        return audit
    audit = repository.newest_before_audit(session, principal, person.subject_id, before)
    if audit is None:
        raise InvalidInput(person.field, NO_BEFORE)
    return audit


def prepare_verification(session: Session, body: VerificationAuditCreate, audit: Audit, settings: Settings) -> None:
    """Validate the people and store them with their before audits; create the after model's nulls for the
    before audits' configurations (the job and the reads find them by model, fingerprint and configuration)."""
    check_model(settings, body.before, "before")
    if body.before == body.model:
        raise InvalidInput("model", "the after model is the before model; give the unlearned model's name")
    principal = _owner(session, audit)
    forgotten = _forgotten(session, body, principal, audit)
    locality = _locality(session, body, principal, forgotten)
    if len(forgotten) + len(locality) > MAX_PEOPLE:
        raise InvalidInput("people", f"more than {MAX_PEOPLE} people in one verification; split it")
    relearned = set()
    if body.options.relearning is not None:
        for i, sid in enumerate(body.options.relearning.subject_ids):
            if sid not in forgotten:
                raise InvalidInput(
                    f"options.relearning.subject_ids[{i}]", "not a forgotten person of this verification; pick one"
                )
            relearned.add(sid)
    groups: dict[tuple[str, str], set[str]] = defaultdict(set)
    for position, person in enumerate([*forgotten.values(), *locality.values()]):
        before = _before_audit(session, principal, person, body.before)
        pids = {r.property_id for r in subjects.results_for_audit(session, before.id, with_candidates=False)}
        unknown = person.targets - pids
        if unknown:
            raise InvalidInput(person.field, "a record's property was not audited for this person on the before model")
        options = before.options or {}
        groups[(json.dumps(options, sort_keys=True), subject_lookalikes(before.summary, options))].update(pids)
        session.add(
            VerificationPerson(
                audit_id=audit.id,
                position=position,
                subject_id=person.subject_id,
                role=person.role,
                before_audit_id=before.id,
                exposed={pid: sorted(t) for pid, t in person.exposed.items()} or None,
                targets=sorted(person.targets or pids) if person.role == PersonRole.FORGOTTEN else [],
                relearned=person.subject_id in relearned,
                scored=False,
                summary={"name_neighbour": True} if person.name_neighbour else None,
            )
        )
    for (options, scheme), pids in groups.items():
        ensure_nulls(session, audit.model, json.loads(options), scheme, pids, settings)
    audit.progress_total = len(forgotten) + len(locality)
    session.flush()


def _side(detail: dict[str, Any], key: str, p: float | None, memorized: bool | None, audit_id: str | None) -> Side:
    outcomes = detail.get(key) or []
    return Side(
        audit_id=audit_id,
        p_value=p,
        memorized=memorized,
        templates_retrieved=sum(bool(o) for o in outcomes),
        n_templates=len(outcomes),
    )


def read_page(session: Session, principal: Principal, audit_id: str, page: int, page_size: int) -> VerificationPage:
    audit = visible_audit_of_kind(session, principal, audit_id, "verification")
    rows, total = repository.facts_page(session, audit_id, page, page_size)
    catalog = load_catalog()
    facts = []
    for f, person in rows:
        d = f.detail or {}
        held = d.get("held_out")
        relearn = d.get("relearning")
        facts.append(
            VerificationFactRead(
                subject_id=person.subject_id,
                role=person.role,
                property=f.property_id,
                label=catalog.get(f.property_id).label if f.property_id in catalog else f.property_id,
                target=f.target,
                status=FactStatus(f.status),
                reason=f.reason,
                before=_side(d, "before_templates", f.p_before, f.memorized_before, person.before_audit_id),
                after=_side(d, "after_templates", f.p_after, f.memorized_after, None),
                paired_p=f.paired_p,
                held_out=HeldOutRead(**held) if held else None,
                context=ContextRead(**d["context"]) if d.get("context") else None,
                relearning=RelearningRead(**relearn) if relearn else None,
            )
        )
    options = audit.options or {}
    return VerificationPage(
        audit_id=audit.id,
        status=audit.status,
        before=str(options.get("before")),
        after=audit.model,
        export=ExportRef(**options["export"]) if options.get("export") else None,
        summary=audit.summary if audit.status == AuditStatus.SUCCEEDED else None,
        facts=facts,
        total=total,
        page=page,
        page_size=page_size,
    )


def subject_names(session: Session, subject_ids: list[int]) -> dict[int, str]:
    """Names for the dashboard's page (the caller records the read in the access log)."""
    out = {}
    for sid in dict.fromkeys(subject_ids):
        subject = session.get(Subject, sid)
        if subject is not None:
            out[sid] = subject.name
    return out
