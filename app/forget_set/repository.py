"""The forget-set query: memorized facts of succeeded subject audits, streamed in id order."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import Select, and_, exists, false, func, or_, select
from sqlalchemy.orm import Session, aliased

from app.auth.keys import Principal
from app.db.models import Audit, Canary, CandidateScore, Fact, FactResult, Subject
from app.db.models.audit import AuditStatus
from app.db.vocabulary import Role
from app.policies import POLICIES, ForgetFilters

READ_ALL = (
    Role.ADMIN,
    Role.REGULATOR,
    Role.PIPELINE,
)  # every audit's facts; an auditor its own key's; anyone else nothing


def _scoped(stmt: Select, principal: Principal) -> Select:
    """Fails closed: a subject token (audit_scope) or a role not named here reads no forget-set record, whatever
    route asks (the routes check roles too)."""
    if principal.audit_scope is not None:
        return stmt.where(false())
    if principal.role == Role.AUDITOR:
        return stmt.where(Audit.owner_key_id == principal.key_id)
    return stmt if principal.role in READ_ALL else stmt.where(false())


def _in_scope(principal: Principal, f: ForgetFilters, *columns) -> Select:
    stmt = (
        select(*columns)
        .select_from(FactResult)
        .join(Audit, Audit.id == FactResult.audit_id)
        .join(Subject, Subject.id == Audit.subject_id)
        .where(Audit.status == AuditStatus.SUCCEEDED, Audit.kind == "subject")
    )
    stmt = _scoped(stmt, principal)
    for column, value in (
        (Audit.model, f.model),
        (Subject.id, f.subject_id),
        (Audit.id, f.audit_id),
        (FactResult.property_id, f.property),
        (Audit.batch_id, f.batch_id),
    ):
        if value is not None:
            stmt = stmt.where(column == value)
    return stmt if f.all_audits or f.audit_id is not None else _newest_only(stmt)


def in_scope(principal: Principal, f: ForgetFilters, *columns) -> Select:
    """The fact results an export's filters and the caller's role cover (newest audits only unless all_audits):
    the forget set's scope, which the rectification set (app/rectification_set) shares."""
    return _in_scope(principal, f, *columns)


def _newest_only(stmt: Select) -> Select:
    """Facts of the newest succeeded audit per (subject, model, property): a subject audited again (the demo run
    twice) is in the forget set once, by its latest result. An audit asked for by id is its own newest."""
    other, result = aliased(Audit), aliased(FactResult)
    newer = (
        select(result.id)
        .join(other, other.id == result.audit_id)
        .where(
            other.subject_id == Audit.subject_id,
            other.model == Audit.model,
            result.property_id == FactResult.property_id,
            other.status == AuditStatus.SUCCEEDED,
            other.kind == "subject",
            or_(
                other.finished_at > Audit.finished_at,
                and_(other.finished_at == Audit.finished_at, other.id > Audit.id),
            ),
        )
    )
    return stmt.where(~exists(newer))


def model_audited(session: Session, principal: Principal, model: str) -> bool:
    """Whether an audit this principal may read was run on ``model``."""
    return session.scalar(_scoped(select(Audit.id).where(Audit.model == model), principal).limit(1)) is not None


def count_in_scope(session: Session, principal: Principal, f: ForgetFilters) -> int:
    """Every fact result the filters cover, whatever its verdict (the m of Benjamini–Hochberg)."""
    return session.scalar(_in_scope(principal, f, func.count(FactResult.id))) or 0


def memorized(session: Session, principal: Principal, f: ForgetFilters) -> Iterator[tuple]:
    """Yields (FactResult, Audit, Subject, [Fact], [retrieving Canary]) without loading the whole table.
    Every policy prefilters in SQL (its ``prefilter``): WikiMem's readings on what the model retrieves (at least
    rank1_any: some template ranks a true value first); the p-value policies on every fact with a verdict statistic,
    since the statistic uses every rank and a flagged fact no template ranks first is still flagged."""
    stmt = _in_scope(principal, f, FactResult, Audit, Subject).where(POLICIES.named(f.policy).prefilter(FactResult, f))
    if f.min_z is not None:  # z̄* over rank-1 templates; null (no rank-1 template) never passes
        stmt = stmt.where(FactResult.z_star.is_not(None), FactResult.z_star >= f.min_z)
    stmt = stmt.order_by(FactResult.id)
    for result, audit, subject in session.execute(stmt.execution_options(yield_per=200)):
        facts = list(session.scalars(select(Fact).where(Fact.id.in_(result.fact_ids)).order_by(Fact.id)))
        canaries = list(
            session.scalars(
                select(Canary).where(Canary.fact_result_id == result.id, Canary.memorized.is_(True)).order_by(Canary.id)
            )
        )
        yield result, audit, subject, facts, canaries


def retrieved_values(session: Session, canaries: list[Canary]) -> set[str]:
    """The true values ranked first under some retrieving canary (a merged near-duplicate counts as its truth)."""
    if not canaries:
        return set()
    rows = session.execute(
        select(CandidateScore.value, CandidateScore.extra).where(
            CandidateScore.canary_id.in_([c.id for c in canaries]),
            CandidateScore.rank == 1,
            CandidateScore.is_ground_truth.is_(True),
        )
    )
    return {(extra or {}).get("near_duplicate_of") or value for value, extra in rows}


def top_counterfactuals(session: Session, fact_result_id: int, n: int) -> list[str]:
    """The n best-ranked counterfactual values of a result's baseline canary (near-duplicates of a true value
    count as true and are left out): the model's most plausible wrong answers."""
    baseline = session.scalar(
        select(Canary.id)
        .where(Canary.fact_result_id == fact_result_id, Canary.kind == "baseline")
        .order_by(Canary.id)
        .limit(1)
    )
    if baseline is None:
        return []
    stmt = (
        select(CandidateScore.value)
        .where(CandidateScore.canary_id == baseline, CandidateScore.is_ground_truth.is_(False))
        .order_by(CandidateScore.rank, CandidateScore.id)
        .limit(n)
    )
    return list(session.scalars(stmt))
