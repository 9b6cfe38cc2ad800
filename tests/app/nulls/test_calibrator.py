"""Which null a subject audit's verdicts come from: missing (a read creates nothing and says how to create it),
created by a submission (once), pending with its progress, failed (not retried on its own), missing again when the
model's weights changed, ready when the fingerprint and configuration match."""

from __future__ import annotations

import uuid

from sqlalchemy import select


def subject_audit(s, fingerprint: str):
    from app.db.models import Audit

    audit = Audit(
        id=uuid.uuid4().hex,
        kind="subject",
        model="groundtruth-tiny",
        status="succeeded",
        options={"paraphrases": 1, "counterfactuals": 5},
        summary={"scoring": {"fingerprint": fingerprint}, "lookalikes": "reversed"},
    )
    s.add(audit)
    s.flush()
    return audit


def null_audits(s) -> list:
    from app.db.models import Audit

    return list(s.scalars(select(Audit).where(Audit.kind == "null").order_by(Audit.created_at)))


def test_missing_created_by_a_submission_pending_failed_changed_and_ready(pg_env):
    """Postgres + Redis without a worker: queued null audits stay queued."""
    from app.db.engine import session_scope
    from app.db.models import Audit, NullDistribution, NullFact
    from app.nulls.calibrate import CHANGED, MISSING, TYPICAL_NAMES, TYPICAL_NAMES_CAVEAT, Calibrator
    from app.nulls.service import ensure_nulls
    from app.settings import get_settings
    from core.measures.null import FactStat

    fp = uuid.uuid4().hex + uuid.uuid4().hex
    with session_scope() as s:
        before = len(null_audits(s))
        audit = subject_audit(s, fp)
        found = Calibrator(s).resolve(audit, "P27")
        assert (found.status, found.message) == ("missing", MISSING) and len(null_audits(s)) == before, "a read wrote"
        cal = Calibrator(s).calibrate(audit, "P27", FactStat(0.5, False, True, 2.0, 2, 1))
        assert (cal.status, cal.p_value, cal.message, cal.caveat) == ("missing", None, MISSING, None)
        assert not Calibrator(s).pending(audit, "P27"), "missing is not pending"
        # the submission's step (app.subjects.service.prepare_subject_audit) creates it, once
        queued = ensure_nulls(s, audit.model, audit.options, "reversed", ["P27"], get_settings())
        assert queued and ensure_nulls(s, audit.model, audit.options, "reversed", ["P27"], get_settings()) is None
        audit_id = audit.id
    with session_scope() as s:  # a reader finds the queued null, with its progress
        audit = s.get(Audit, audit_id)
        found = Calibrator(s).resolve(audit, "P27")
        assert (found.status, found.row.audit_id) == ("pending", queued) and len(null_audits(s)) == before + 1
        assert found.ref().progress.done == 0 and found.ref().progress.eta_seconds is None
        assert Calibrator(s).pending(audit, "P27"), "pending() must say what resolve() says"
        s.get(Audit, queued).status = "failed"
    with session_scope() as s:
        audit = s.get(Audit, audit_id)
        assert Calibrator(s).resolve(audit, "P27").status == "failed"
        assert ensure_nulls(s, audit.model, audit.options, "reversed", ["P27"], get_settings()) is None, "a retry"
        null = s.get(Audit, queued)
        null.status = "succeeded"
        row = s.scalar(select(NullDistribution).where(NullDistribution.audit_id == queued))
        row.fingerprint, row.n_facts = "0" * 64, 3  # computed on other weights
        s.add_all(
            NullFact(
                distribution_id=row.id,
                person=i,
                name="N",
                value="v",
                assigned=True,
                share=float(i == 0),
                strict=i == 0,
                lenient=i == 0,
                z_star=None,
                n_templates=2,
                n_z=0,
            )
            for i in range(3)
        )
    with session_scope() as s:
        audit = s.get(Audit, audit_id)
        found = Calibrator(s).resolve(audit, "P27")
        assert (found.status, found.message) == ("missing", CHANGED)  # the weights changed: say so, create nothing
        assert len(null_audits(s)) == before + 1
        row = s.scalar(select(NullDistribution).where(NullDistribution.audit_id == queued))
        row.fingerprint = fp
    with session_scope() as s:
        audit = s.get(Audit, audit_id)
        calibrator = Calibrator(s)
        cal = calibrator.calibrate(audit, "P27", FactStat(0.5, False, True, 2.0, 2, 1))
        # null shares (1, 0, 0): only the share-1 fact is at least as extreme -> (1 + 1) / (1 + 3)
        assert cal.status == "ready" and cal.null_audit_id == queued and cal.p_value == 0.5
        assert not Calibrator(s).pending(audit, "P27"), "a ready null is not pending (read without its facts)"
        assert cal.fpr["lenient"].k == 1 and cal.fpr["lenient"].n == 3 and cal.memorized is False
        # citizenship: the hand-written null holds within a factor of two at p <= 0.01 (docs/measures.md): said
        assert cal.caveat == TYPICAL_NAMES_CAVEAT and "P27" in TYPICAL_NAMES and "factor of two" in cal.caveat


def test_a_resumed_nulls_time_left_is_at_its_scoring_rate_not_diluted_by_the_pause():
    """A null half done by one run (one `memaudit demo`) and resumed an hour later: the time left is the remaining
    sentences at its finished jobs' rate (100 sentences in 10 s of scoring), not the rate since it first started (an
    hour for half of it: ≈ 1 h more, which made a second demo decline to wait)."""
    from datetime import timedelta

    from app.db.base import utcnow
    from app.db.models import Audit
    from app.nulls.calibrate import null_progress

    an_hour_ago = utcnow() - timedelta(hours=1)
    null = Audit(kind="null", model="groundtruth-tiny", status="running", progress_done=100, progress_total=200)
    null.started_at = an_hour_ago
    assert null_progress(null).eta_seconds >= 3500, "no job finished yet: the rate since it started is all there is"
    null.summary = {"cost": {"seconds": 10.0, "scored": 80, "cached": 20, "jobs": 1}}
    assert null_progress(null).eta_seconds == 10, null_progress(null)
    null.progress_done = 0
    assert null_progress(null).eta_seconds is None, "nothing scored: no time left to say"


def test_an_audit_whose_look_alikes_an_earlier_reader_drew_is_told_to_audit_again(pg_env):
    """Same-origin look-alikes depend on the name-origin reader (which origins and lists it knows): an audit records
    the reader it used, a null's key holds it, and an audit from before it was recorded (the 51 Faker origins) is not
    judged against a null whose look-alikes the current reader drew — it says so, and a read creates nothing."""
    from app.db.engine import session_scope
    from app.nulls.calibrate import MISSING, OLD_READER, Calibrator
    from app.nulls.config import subject_reader
    from core.names.lookalikes import READER, READER_BEFORE

    fp = uuid.uuid4().hex + uuid.uuid4().hex
    with session_scope() as s:
        before = len(null_audits(s))
        old = subject_audit(s, fp)
        old.summary = {**old.summary, "lookalikes": "same_origin"}  # no lookalike_reader: drawn before it existed
        new = subject_audit(s, fp)
        new.summary = {**new.summary, "lookalikes": "same_origin", "lookalike_reader": READER}
        assert (subject_reader(old.summary), subject_reader(new.summary)) == (READER_BEFORE, READER)
        calibrator = Calibrator(s)
        assert calibrator.key(old, "P27") != calibrator.key(new, "P27")
        assert (calibrator.resolve(old, "P27").status, calibrator.resolve(old, "P27").message) == (
            "missing",
            OLD_READER,
        )
        assert calibrator.resolve(new, "P27").message == MISSING  # the current reader: the usual missing null
        reversed_ = subject_audit(s, fp)  # reversed letters do not depend on the reader
        assert Calibrator(s).resolve(reversed_, "P27").message != OLD_READER
        assert len(null_audits(s)) == before, "a read wrote"
