"""The coverage job run in-process on the embedded SQLite store: resume after a crash, reruns, readable
failures (deleted dataset, prompt longer than the context, nothing to probe)."""

from __future__ import annotations

import io

import pytest
from sqlalchemy import delete, func, select, update

from app.auth.keys import Principal
from app.coverage.schemas import CoverageAuditCreate
from app.coverage.service import SourceFile, ingest, prepare_coverage_audit
from app.db.engine import session_scope
from app.db.models import Audit, CoverageResult, Dataset
from app.settings import get_settings
from scripts.train_items_model import MODEL_DIR, default_catalog
from workers.jobs.coverage import run

ADMIN = Principal(id="test", role="admin")
ITEMS_MODEL = f"hf:{MODEL_DIR}"


def create_dataset() -> str:
    catalog = default_catalog()
    sources = [
        SourceFile(target, f"{target}.dat", io.BytesIO("".join(f"{x}\n" for x in lines).encode()), 0)
        for target, lines in (
            ("items", catalog.items),
            ("users", catalog.users),
            ("interactions", catalog.interactions),
        )
    ]
    with session_scope() as s:
        return ingest(s, get_settings(), ADMIN, "catalog", sources).id


def create_audit(dataset_id: str, target: str = "items", **options) -> str:
    body = CoverageAuditCreate(
        kind="coverage", model=ITEMS_MODEL, dataset_id=dataset_id, target=target, options=options
    )
    with session_scope() as s:
        audit = Audit(kind="coverage", model=body.model, options=body.options.model_dump(mode="json"))
        s.add(audit)
        s.flush()
        prepare_coverage_audit(s, body, audit, get_settings())
        return audit.id


def audit_row(audit_id: str) -> Audit:
    with session_scope() as s:
        return s.get(Audit, audit_id)


def result_count(audit_id: str) -> int:
    with session_scope() as s:
        return s.scalar(select(func.count()).where(CoverageResult.audit_id == audit_id)) or 0


@pytest.fixture
def dataset_id(sqlite_env) -> str:
    return create_dataset()


def test_a_restarted_job_resumes_and_reaches_the_same_result(dataset_id):
    audit_id = create_audit(dataset_id, sample=24, batch_size=8)
    run(audit_id)
    first = audit_row(audit_id)
    assert first.status == "succeeded", first.error
    assert result_count(audit_id) == 24 and first.progress_done == first.progress_total == 24

    # a worker died after storing some outcomes: the retry keeps them and probes only the rest
    with session_scope() as s:
        kept = s.scalars(select(CoverageResult.id).where(CoverageResult.audit_id == audit_id).limit(10)).all()
        s.execute(delete(CoverageResult).where(CoverageResult.audit_id == audit_id, CoverageResult.id.not_in(kept)))
        s.execute(update(Audit).where(Audit.id == audit_id).values(status="running", summary=None))
    run(audit_id)
    again = audit_row(audit_id)
    assert again.status == "succeeded" and result_count(audit_id) == 24
    for field in ("coverage", "matched", "buckets"):
        assert again.summary[field] == first.summary[field], field

    run(audit_id)  # a duplicate delivery of a finished job changes nothing
    assert audit_row(audit_id).finished_at == again.finished_at


def test_a_deleted_dataset_fails_the_audit_with_a_reason(dataset_id):
    audit_id = create_audit(dataset_id, sample=5)
    with session_scope() as s:
        s.delete(s.get(Dataset, dataset_id))
    run(audit_id)
    audit = audit_row(audit_id)
    assert audit.status == "failed" and "dataset no longer exists" in audit.error


def test_a_prompt_longer_than_the_context_fails_readably(dataset_id):
    audit_id = create_audit(dataset_id, k=40, sample=3)  # 40 example lines overflow the tiny model's 192 tokens
    run(audit_id)
    audit = audit_row(audit_id)
    assert audit.status == "failed" and "context" in audit.error and "lower k" in audit.error, audit.error


def test_interactions_with_too_large_k_have_nothing_to_probe(dataset_id):
    audit_id = create_audit(dataset_id, "interactions", k=45)  # every synthetic user has at most 30 interactions
    run(audit_id)
    audit = audit_row(audit_id)
    assert audit.status == "failed" and "nothing to probe" in audit.error, audit.error
