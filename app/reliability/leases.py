"""Leases on running audits: at most one worker runs an audit at a time, and a dead worker is noticed.

A worker claims an audit with one conditional UPDATE (queued, or running under an expired lease) that writes
its owner id and an expiry; a heartbeat renews the expiry while the job runs; the reconciler hands an audit
whose lease expired back to the queue. Every write a job makes is *fenced*: the job's transaction re-checks the
lease on the audit row before it commits (and, on Postgres, holds that row lock until it does), so a job that
lost its lease — or whose audit was cancelled or erased — cannot write anything, even before it notices.

Times are the workers' clocks (UTC): hosts are expected to be NTP-synchronised to well under the lease TTL.
"""

from __future__ import annotations

import os
import socket
import threading
from datetime import datetime, timedelta
from uuid import uuid4

from sqlalchemy import event, func, or_, select, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Audit
from app.db.models.audit import AuditStatus

RUNNING, QUEUED = AuditStatus.RUNNING, AuditStatus.QUEUED


class LeaseLost(Exception):
    """This worker no longer holds the audit's lease (taken over after a stall, cancelled, or erased)."""


def new_owner_id() -> str:
    """Unique per job run: host, process and a random part (a restarted process never reuses an id)."""
    return f"{process_owner_prefix()}{uuid4().hex[:12]}"


def process_owner_prefix() -> str:
    """What every owner id of this process starts with."""
    return f"{socket.gethostname()[:32]}:{os.getpid()}:"


def hand_back_process(session: Session) -> list[str]:
    """This process is exiting: every audit one of its runs holds goes back to `queued`, not counted as an attempt
    (the process did not die; its runs stop with it). Their fenced writes fail from now on. Returns their ids."""
    held = list(
        session.scalars(
            select(Audit.id).where(Audit.status == RUNNING, Audit.lease_owner.startswith(process_owner_prefix()))
        )
    )
    if held:
        session.execute(
            update(Audit)
            .where(Audit.id.in_(held), Audit.status == RUNNING, Audit.lease_owner.startswith(process_owner_prefix()))
            .values(status=QUEUED, lease_owner=None, lease_expires_at=None, attempts=Audit.attempts - 1)
            .execution_options(synchronize_session=False)
        )
    return held


def expiry(ttl: float, now: datetime | None = None) -> datetime:
    return (now or utcnow()) + timedelta(seconds=ttl)


def claim(session: Session, audit_id: str, owner: str, ttl: float) -> bool:
    """Mark the audit running under ``owner``; False when it is finished or another live lease holds it."""
    now = utcnow()
    result = session.execute(
        update(Audit)
        .where(
            Audit.id == audit_id,
            Audit.status.in_((QUEUED, RUNNING)),
            or_(Audit.lease_owner.is_(None), Audit.lease_expires_at < now),
        )
        .values(
            status=RUNNING,
            started_at=func.coalesce(Audit.started_at, now),  # the first run's start
            error=None,
            attempts=Audit.attempts + 1,
            lease_owner=owner,
            lease_expires_at=expiry(ttl, now),
        )
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def renew(session: Session, audit_id: str, owner: str, ttl: float) -> bool:
    """Extend the lease; False when this owner lost it (or the audit is no longer running)."""
    result = session.execute(
        update(Audit)
        .where(Audit.id == audit_id, Audit.lease_owner == owner, Audit.status == RUNNING)
        .values(lease_expires_at=expiry(ttl))
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def release(session: Session, audit_id: str, owner: str, **values: object) -> bool:
    """End this owner's run: set ``values`` (a final status, or ``status="queued"`` to hand it back)."""
    result = session.execute(
        update(Audit)
        .where(Audit.id == audit_id, Audit.lease_owner == owner, Audit.status == RUNNING)
        .values(lease_owner=None, lease_expires_at=None, **values)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def status_of(session: Session, audit_id: str) -> str | None:
    return session.scalar(select(Audit.status).where(Audit.id == audit_id))


def expired(session: Session, now: datetime | None = None) -> list[tuple[str, str, int]]:
    """(id, kind, attempts) of running audits whose lease has expired (or that never had one)."""
    now = now or utcnow()
    stmt = select(Audit.id, Audit.kind, Audit.attempts).where(
        Audit.status == RUNNING, or_(Audit.lease_expires_at.is_(None), Audit.lease_expires_at < now)
    )
    return [tuple(row) for row in session.execute(stmt)]


def take_over_expired(session: Session, audit_id: str, **values: object) -> bool:
    """Set ``values`` on a running audit whose worker died (``status="queued"`` hands it back to the queue);
    conditional on the lease still being expired, so that two reconcilers never both do it."""
    now = utcnow()
    result = session.execute(
        update(Audit)
        .where(
            Audit.id == audit_id,
            Audit.status == RUNNING,
            or_(Audit.lease_expires_at.is_(None), Audit.lease_expires_at < now),
        )
        .values(lease_owner=None, lease_expires_at=None, **values)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


# --- fencing: every commit made by a job's thread re-checks the job's lease ------------------------------

_fence = threading.local()


def fence_commits(audit_id: str, owner: str, ttl: float) -> None:
    """From now on, commits in this thread fail with LeaseLost unless ``owner`` still holds the lease."""
    _fence.lease = (audit_id, owner, ttl)


def unfence_commits() -> None:
    _fence.lease = None


@event.listens_for(Session, "before_commit")
def _check_lease(session: Session) -> None:
    lease = getattr(_fence, "lease", None)
    if lease is None:
        return
    audit_id, owner, ttl = lease
    # On Postgres the UPDATE holds the audit row's lock until this transaction commits, so a takeover or a
    # cancellation is ordered either wholly before these writes (and they roll back) or wholly after them.
    if not renew(session, audit_id, owner, ttl):
        raise LeaseLost(f"audit {audit_id}: lease lost; this run's writes are rolled back")
