"""What a row of a list says about a subject audit: how many facts the default policy calls memorized, how many it
calls misattributed (a specific false value preferred beyond chance, Art. 16), of how many, and how many wait for
their null. Read with the same calibration as GET /audits/{id}/facts, but a read of a list
queues nothing: a missing null stays "pending" here (the audit's own page is where the verdict is asked for).

Calibration is being reworked (new statistics, new statuses): every field is read defensively, and a status this
page does not know is counted as "other" and shown by its name, never as a verdict."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from app.db.models import Audit
from app.db.models.audit import AuditStatus
from app.nulls import calibrate
from app.nulls.misattribution import MisattributionJudge
from app.subjects.repository import results_for_audit

MAX_P = getattr(calibrate, "DEFAULT_MAX_P", 0.01)  # the default policy's threshold, as the pages state it
VERDICTS = ("memorized", "none", "pending")  # the list's verdict filter: some fact memorized / none / waiting
VERDICT_SCAN = 500  # a verdict filter reads at most this many newest finished subject audits (a bounded loop)


@dataclass
class VerdictCounts:
    """Facts of one audit: memorized under the default policy, total, pending (null not ready), other statuses."""

    memorized: int = 0
    misattributed: int = 0
    total: int = 0
    pending: int = 0
    other: dict[str, int] = field(default_factory=dict)
    null_audit_id: str | None = None

    @property
    def verdict(self) -> str:
        if self.memorized:
            return "memorized"
        if self.pending:
            return "pending"
        return "undecided" if self.other else "none"


def fact_status(cal: Any) -> tuple[str, bool | None]:
    """(status, memorized) of one fact's calibration, whatever shape it has: a missing calibration is pending."""
    if cal is None:
        return "pending", None
    status = str(getattr(cal, "status", None) or "pending")
    memorized = getattr(cal, "memorized", None)
    return status, memorized if isinstance(memorized, bool) else None


def counts_for(session: Session, audits: Iterable[Audit]) -> dict[str, VerdictCounts]:
    """Verdict counts of each succeeded subject audit (others get none); nothing is queued."""
    out: dict[str, VerdictCounts] = {}
    calibrator = calibrate.Calibrator(session)
    judge = MisattributionJudge(calibrator)
    for audit in audits:
        if audit.kind != "subject" or audit.status != AuditStatus.SUCCEEDED:
            continue
        counts = out[audit.id] = VerdictCounts()
        for result in results_for_audit(session, audit.id, with_candidates=False):
            counts.total += 1
            cal = calibrator.calibrate_result(audit, result, result.canaries)
            status, memorized = fact_status(cal)
            wrong = judge.judge(audit, result) if cal is not None else None
            counts.misattributed += bool(wrong and wrong.misattributed)
            if memorized is True:
                counts.memorized += 1
            elif memorized is None and status in ("pending", "ready"):
                counts.pending += 1
            elif memorized is None:
                counts.other[status] = counts.other.get(status, 0) + 1
            counts.null_audit_id = counts.null_audit_id or getattr(cal, "null_audit_id", None)
    return out


def eta_seconds(audit: Audit | None, now: datetime | None = None) -> float | None:
    """Time left for a running audit: elapsed / done × remaining, from its progress and started_at."""
    if audit is None or audit.started_at is None or not audit.progress_done or not audit.progress_total:
        return None
    started = audit.started_at if audit.started_at.tzinfo else audit.started_at.replace(tzinfo=UTC)
    elapsed = ((now or datetime.now(UTC)) - started).total_seconds()
    remaining = max(0, audit.progress_total - audit.progress_done)
    return max(0.0, elapsed / audit.progress_done * remaining)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown until it has made progress"
    seconds = round(seconds)
    if seconds < 90:
        return f"about {seconds} s"
    if seconds < 5400:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"
