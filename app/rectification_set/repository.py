"""The rectification-set query: fact results with a misattribution statistic, in the forget set's scope (the same
filters, roles and newest-audit rule: app.forget_set.repository.in_scope), streamed in id order."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.models import Audit, Fact, FactResult, Subject
from app.forget_set.repository import in_scope
from app.policies import ForgetFilters


def misattributions(session: Session, principal: Principal, f: ForgetFilters) -> Iterator[tuple]:
    """Yields (FactResult, Audit, Subject, [Fact]) of every fact in scope that names a false value."""
    stmt = in_scope(principal, f, FactResult, Audit, Subject).where(FactResult.misattribution.is_not(None))
    for result, audit, subject in session.execute(stmt.order_by(FactResult.id).execution_options(yield_per=200)):
        facts = list(session.scalars(select(Fact).where(Fact.id.in_(result.fact_ids)).order_by(Fact.id)))
        yield result, audit, subject, facts
