"""Subject use cases: validate and store a subject audit's person and facts, read results, erase a subject."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.orm import Session

from app.audits import repository as audits_repository
from app.audits.service import visible_audit_of_kind
from app.auth.keys import Principal
from app.db.base import utcnow
from app.db.models import Audit, Fact, Subject
from app.db.models.audit import AuditStatus, new_audit_id
from app.db.models.auth import Role
from app.errors import InvalidInput, NotFound
from app.nll_cache import repository as cache
from app.nulls.calibrate import Calibrator, calibrate_results
from app.nulls.misattribution import MisattributionJudge
from app.nulls.schemas import CalibrationInfo
from app.nulls.service import ensure_nulls
from app.settings import Settings
from app.subjects import namesakes, repository
from app.subjects.held_out import held_out_sentences
from app.subjects.schemas import (
    CanaryRead,
    CandidateRead,
    Detail,
    FactResultRead,
    FactsPage,
    Person,
    SubjectAuditCreate,
    SubjectAuditOptions,
)
from app.subjects.wikidata_source import fetch_facts
from app.wikidata.repository import ensure_properties
from core.catalog import Catalog, UnknownProperty, ValueProblem, load_catalog, split_template
from core.names.lookalikes import lookalikes_for

LOOKALIKE_SAMPLE = 100  # a batch's names whose look-alike scheme is checked for a same_origin fallback (8 ms each)


def normalize_name(raw: str, settings: Settings, field: str = "subject.name") -> str:
    """A subject's name with its whitespace collapsed; InvalidInput naming ``field`` (never the name) if unusable."""
    name = " ".join(raw.split())
    if not name:
        raise InvalidInput(field, "the subject name is empty; give the person's name")
    if len(name) > settings.max_name_length:
        raise InvalidInput(field, f"the subject name is longer than {settings.max_name_length} characters")
    if not any(ch.isalpha() for ch in name):
        # look-alike names S(h) vary a name's letters; a name without any has no look-alikes to calibrate with
        raise InvalidInput(field, "the subject name has no letters; give the person's name as written")
    return name


def normalize_fact(catalog: Catalog, pid: str, value: str, field: str, settings: Settings) -> tuple[str, str]:
    """(property, value in the catalog's spelling); InvalidInput naming ``field``.property or .value if unusable."""
    try:
        prop = catalog.get(pid)
    except UnknownProperty:
        raise InvalidInput(
            f"{field}.property", "unknown property id: use a property id from GET /properties (`memaudit properties`)"
        ) from None
    if not value.strip():
        raise InvalidInput(f"{field}.value", "the value is empty")
    if len(value) > settings.max_value_length:
        raise InvalidInput(f"{field}.value", f"the value is longer than {settings.max_value_length} characters")
    try:  # dates and quantities in the catalog's spelling, so that counterfactuals exclude them by meaning
        return pid, prop.normalize(value)
    except ValueProblem as exc:
        raise InvalidInput(f"{field}.value", str(exc)) from None


def _validate_facts(body: SubjectAuditCreate, settings: Settings) -> list[tuple[str, str]]:
    facts = body.subject.facts
    if len(facts) > settings.max_facts_per_subject:
        raise InvalidInput(
            "subject.facts", f"{len(facts)} facts given; at most {settings.max_facts_per_subject} per audit"
        )
    catalog = load_catalog()
    return [normalize_fact(catalog, f.property, f.value, f"subject.facts[{i}]", settings) for i, f in enumerate(facts)]


def prefetch_subject(body: SubjectAuditCreate, settings: Settings) -> None:
    """Before the request's transaction: a subject given by Wikidata id alone gets its facts from an imported dump
    or the Wikidata API here, so that the outbound call holds no database connection."""
    if not body.subject.facts and body.subject.wikidata_id is not None:
        body._fetched = fetch_facts(body.subject.wikidata_id, settings)


def prepare_subject_audit(session: Session, body: SubjectAuditCreate, audit: Audit, settings: Settings) -> None:
    """Facts come from the request (a person outside Wikidata) or, when only a Wikidata id is given, from an
    imported dump or the Wikidata API. A key that audits the same person with the same facts again re-audits its
    stored subject (no second copy of the personal data; erasing it erases every audit of it). The nulls its
    verdicts need are created here, in the same transaction, if no earlier submission created them."""
    facts = _validate_facts(body, settings)
    name, source = body.subject.name, "request"
    if not facts:
        if body._fetched is None:
            prefetch_subject(body, settings)
        found = body._fetched
        facts, source, name = found.facts, found.source, name or found.name
    name = normalize_name(name or "", settings)
    ensure_properties(session, {pid for pid, _ in facts})
    wikidata_id, owner = body.subject.wikidata_id, audit.owner_key_id
    same = [(pid, value, source) for pid, value in facts]
    subject = repository.same_subject(session, owner, name, wikidata_id, same) if owner is not None else None
    if subject is None:
        subject = Subject(name=name, wikidata_id=wikidata_id, owner_key_id=owner)
        subject.facts = [Fact(property_id=pid, value=value, source=source) for pid, value in facts]
        session.add(subject)
        session.flush()
    audit.subject_id = subject.id
    options = audit.options or {}
    scheme = lookalikes_for(name, options)[1]  # same_origin falls back to reversed for a name of unknown origin
    ensure_nulls(session, audit.model, options, scheme, {pid for pid, _ in facts}, settings)


def add_subject_audits(
    session: Session,
    people: Sequence[Person],
    models: Sequence[str],
    options: SubjectAuditOptions,
    owner_key_id: int | None,
    batch_id: str,
    settings: Settings,
) -> list[str]:
    """Many subject audits at once (a batch): one stored subject per person, one queued audit per person and model,
    inserted in bulk. ``people`` are validated already (normalize_name / normalize_fact). Each person gets a
    subject of its own (no reuse of an earlier one: a roster is audited as submitted). Returns the audit ids in
    (model, person) order; the caller enqueues them. The nulls the batch needs are created here (``_batch_nulls``)."""
    now = utcnow()
    subject_ids = _insert_people(session, people, owner_key_id, now)
    stored = options.model_dump(mode="json")  # what POST /audits stores for a subject audit (kind.stored_options)
    rows = [
        {
            "id": new_audit_id(),
            "kind": "subject",
            "model": model,
            "options": stored,
            "status": AuditStatus.QUEUED.value,
            "progress_done": 0,
            "progress_total": 0,
            "attempts": 0,
            "owner_key_id": owner_key_id,
            "subject_id": sid,
            "batch_id": batch_id,
            "batch_row": p.row,
            "created_at": now,
        }
        for model in models
        for sid, p in zip(subject_ids, people, strict=True)
    ]
    audits_repository.insert_many(session, rows)
    _batch_nulls(session, people, models, stored, settings)
    return [r["id"] for r in rows]


def _insert_people(session: Session, people: Sequence[Person], owner_key_id: int | None, now: datetime) -> list[int]:
    """One stored subject per person, with its facts, in bulk; returns the subjects' ids in ``people``'s order."""
    ensure_properties(session, {pid for p in people for pid, _ in p.facts})
    subject_ids = repository.insert_subjects(
        session,
        [
            {"name": p.name, "wikidata_id": p.wikidata_id, "owner_key_id": owner_key_id, "created_at": now}
            for p in people
        ],
    )
    repository.insert_facts(
        session,
        [
            {"subject_id": sid, "property_id": pid, "value": value, "source": "request"}
            for sid, p in zip(subject_ids, people, strict=True)
            for pid, value in p.facts
        ],
    )
    return subject_ids


def _batch_nulls(
    session: Session, people: Sequence[Person], models: Sequence[str], options: dict, settings: Settings
) -> None:
    """A batch's nulls: every property of the roster under its look-alike scheme, and under `reversed` for the
    properties of the first LOOKALIKE_SAMPLE people whose names fall back to it (same_origin only). A fact of a
    later person that falls back and whose null no one created reads `missing`, saying how to create it."""
    pids = {pid for p in people for pid, _ in p.facts}
    by_scheme: dict[str, set[str]] = {str(options.get("lookalikes") or "reversed"): pids}
    if options.get("lookalikes") == "same_origin":
        for p in people[:LOOKALIKE_SAMPLE]:
            if lookalikes_for(p.name, options)[1] == "reversed":
                by_scheme.setdefault("reversed", set()).update(pid for pid, _ in p.facts)
    for model in models:
        for scheme, scheme_pids in by_scheme.items():
            ensure_nulls(session, model, options, scheme, scheme_pids, settings)


def _sentence(template: str, h: str, v: str) -> str:
    """A canary sentence exactly as scored: from the canary's stored template (contextualized ones included)."""
    head, tail = split_template(template, h, v)
    return head + tail


def _candidates(canary, name: str) -> list[CandidateRead]:
    def sentence(h: str, v: str) -> str:
        return _sentence(canary.template, h, v)

    return [
        CandidateRead(
            value=c.value,
            is_ground_truth=c.is_ground_truth,
            rank=c.rank,
            score=c.score,
            sentence=sentence(name, c.value),
            nll_subject=c.nll_subject,
            generic_sentence=sentence(canary.generic_subject, c.value),
            nll_generic=c.nll_generic,
            similar_sentences=[sentence(h, c.value) for h in canary.similar_names],
            nll_similar=list(c.nll_similar),
            near_duplicate_of=(c.extra or {}).get("near_duplicate_of"),
            cosine=(c.extra or {}).get("cosine"),
        )
        for c in canary.candidates
    ]


def read_facts(session: Session, principal: Principal, audit_id: str, detail: Detail) -> FactsPage:
    audit = visible_audit_of_kind(session, principal, audit_id, "subject")
    with_candidates = detail == "candidates"
    results = repository.results_for_audit(session, audit_id, with_candidates)
    facts = repository.facts_by_id(session, [i for r in results for i in r.fact_ids])
    subject = repository.get_subject(session, audit.subject_id) if audit.subject_id else None
    catalog = load_catalog()
    out = []
    for r in results:
        canaries = [
            CanaryRead(
                template_index=c.template_index,
                kind=c.kind,
                template=c.template,
                rank=c.rank,
                memorized=c.memorized,
                lead_margin=c.lead_margin,
                z_star=c.z_star,
                generic_subject=c.generic_subject,
                similar_names=list(c.similar_names),
                candidates=_candidates(c, subject.name) if with_candidates and subject else None,
            )
            for c in r.canaries
        ]
        out.append(
            FactResultRead(
                property=r.property_id,
                label=catalog.get(r.property_id).label if r.property_id in catalog else r.property_id,
                special_category=catalog.get(r.property_id).special_category if r.property_id in catalog else None,
                values=[facts[i].value for i in r.fact_ids if i in facts],
                share=r.share,
                strict=r.strict,
                lenient=r.lenient,
                z_star=r.z_star,
                n_templates=r.n_templates,
                counterfactuals=[cf.value for cf in r.counterfactuals],
                canaries=canaries,
                mode="generation" if r.generation is not None else "scoring",
                answers=r.generation,
            )
        )
    info = _judge(session, audit, results, out)
    return FactsPage(
        audit_id=audit_id,
        subject_id=audit.subject_id,
        detail=detail,
        facts=out,
        calibration=info,
        provenance=audit.provenance,
    )


def _judge(session: Session, audit: Audit, results: list, out: list[FactResultRead]) -> CalibrationInfo | None:
    """Each fact's calibration and misattribution, from one calibrator (its nulls loaded once)."""
    calibrator = Calibrator(session)
    calibrations, info = calibrate_results(session, audit, results, calibrator)
    judge = MisattributionJudge(calibrator)
    subject = repository.get_subject(session, audit.subject_id) if audit.subject_id else None
    for fact, calibration, r in zip(out, calibrations, results, strict=True):
        fact.calibration = calibration
        fact.misattribution = m = judge.judge(audit, r) if calibration is not None else None
        if m is not None and m.misattributed and m.value is not None:
            m.namesake = namesakes.confused(session, audit, subject, r.property_id, m.value)
    return info


def _sentence_hashes(session: Session, subject: Subject) -> set[str]:
    """Hashes of every sentence scored for this subject (to drop them from the NLL cache)."""
    hashes: set[str] = set()
    for audit in repository.audits_of_subject(session, subject.id):
        for r in repository.results_for_audit(session, audit.id, with_candidates=True):
            for c in r.canaries:
                # Contextualized canaries hold the subject's other facts even in their generic-subject sentences.
                names = (subject.name, *c.similar_names) + ((c.generic_subject,) if c.kind == "context" else ())
                for cand in c.candidates:
                    for h in names:
                        hashes.add(cache.text_hash(_sentence(c.template, h, cand.value)))
    hashes.update(cache.text_hash(text) for text in held_out_sentences(session, subject))  # its verifications'
    return hashes


def erase_subject(session: Session, principal: Principal, subject_id: int) -> dict[str, int]:
    """Delete the subject, its facts, its audits and all results, and the cached NLLs of sentences naming them.
    Generic-subject sentences ("This person …") name nobody and stay cached."""
    subject = repository.get_subject(session, subject_id)
    if subject is None or (principal.role == Role.AUDITOR and subject.owner_key_id != principal.key_id):
        raise NotFound("no subject with this id (among those you may erase)")
    n_audits = len(repository.audits_of_subject(session, subject_id))
    removed = cache.forget(session, _sentence_hashes(session, subject))
    n_facts = len(subject.facts)
    session.delete(subject)
    session.flush()
    return {"subject_id": subject_id, "facts": n_facts, "audits": n_audits, "cached_sentences": removed}


def read_canary(session: Session, principal: Principal, audit_id: str, fact: int, template: int) -> CanaryRead:
    """One template of one fact (facts in the order of GET /audits/{id}/facts) with its candidates, for a
    drill-down: loads that canary's candidates only, not the whole audit's."""
    audit = visible_audit_of_kind(session, principal, audit_id, "subject")
    results = repository.results_for_audit(session, audit_id, with_candidates=False)
    canary = None
    if 0 <= fact < len(results):
        canary = next((c for c in results[fact].canaries if c.template_index == template), None)
    if canary is None:
        raise NotFound("no such fact or template in this audit; pick one from the audit's grid")
    subject = repository.get_subject(session, audit.subject_id) if audit.subject_id else None
    return CanaryRead(
        template_index=canary.template_index,
        kind=canary.kind,
        template=canary.template,
        rank=canary.rank,
        memorized=canary.memorized,
        lead_margin=canary.lead_margin,
        z_star=canary.z_star,
        generic_subject=canary.generic_subject,
        similar_names=list(canary.similar_names),
        candidates=_candidates(canary, subject.name) if subject else [],
    )
