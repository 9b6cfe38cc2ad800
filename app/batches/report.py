"""A batch's cohort report: per model, WikiMem's cohort statistics over its succeeded audits, computed by the same
code as GET /cohort-stats (app.subjects.cohort.cohort_of, over core.measures.cohort) with the matching null's rates
beside them; with several models, per pair, the facts one model memorized and the other did not."""

from __future__ import annotations

from itertools import combinations

from sqlalchemy.orm import Session

from app.batches import repository
from app.batches.schemas import BatchReport, ModelComparison
from app.db.models.batch import Batch
from app.policies import LENIENT
from app.subjects.cohort import MAX_COHORT, cohort_of


def read_report(session: Session, batch: Batch) -> BatchReport:
    cohorts, notes = {}, []
    for model in batch.models:
        audits = repository.succeeded_audits(session, batch.id, model, MAX_COHORT + 1)
        if len(audits) > MAX_COHORT:
            cohorts[model] = None
            notes.append(
                f"{model}: more than {MAX_COHORT} succeeded audits; read the cohort in parts with"
                " GET /cohort-stats?audit_id=… (ids from GET /batches/{id}/audits)"
            )
            continue
        cohorts[model] = cohort_of(session, audits) if audits else None
    if len(batch.models) > 1 and batch.people > MAX_COHORT:  # bounded like the cohorts: no million-row reads a poll
        notes.append(
            f"model comparison left out: more than {MAX_COHORT} people; compare in parts with"
            f" GET /forget-set?batch_id=…&policy={LENIENT.name} per model"
        )
        return BatchReport(batch_id=batch.id, cohorts=cohorts, comparison=[], notes=notes)
    return BatchReport(batch_id=batch.id, cohorts=cohorts, comparison=_compare(session, batch), notes=notes)


def _compare(session: Session, batch: Batch) -> list[ModelComparison]:
    """Per pair of models: of the facts (roster row, property) audited on both, how many each memorized (lenient:
    some template ranks a true value first) and the other did not."""
    if len(batch.models) < 2:
        return []
    lenient = {m: repository.lenient_by_row(session, batch.id, m) for m in batch.models}
    out = []
    for a, b in combinations(batch.models, 2):
        shared = lenient[a].keys() & lenient[b].keys()
        out.append(
            ModelComparison(
                a=a,
                b=b,
                people=len({row for row, _ in shared}),
                facts=len(shared),
                only_a=sum(lenient[a][k] and not lenient[b][k] for k in shared),
                only_b=sum(lenient[b][k] and not lenient[a][k] for k in shared),
                both=sum(lenient[a][k] and lenient[b][k] for k in shared),
            )
        )
    return out
