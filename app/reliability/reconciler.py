"""The reconciler: makes Redis (or the embedded runner) agree with the database, which is the record of what
must run. Every worker process runs one, and so does the API in embedded mode; they may run at once, since
every change they make is a conditional UPDATE. It is given the kinds it may enqueue by the process that starts it
(the worker's entry point, the API's startup), never importing the composition root ``app.kinds`` itself.

Each pass, every ``reconcile_interval_seconds``:
- a `running` audit whose lease expired (its worker died: kill -9, OOM, lost host; or Redis lost the job while
  the worker died) goes back to `queued` and is enqueued again — or is failed after ``max_attempts`` runs, so
  that an audit that kills its worker cannot kill workers forever;
- a `queued` audit that no job will run (Redis was down at submission, restarted without persistence, or the
  API died between commit and enqueue; or its run was handed back) is enqueued once it is older than
  ``reconcile_grace_seconds`` (a batch's: ``reconcile_batch_grace_seconds``);
- a `queued` audit that waits for others (app/reliability/waits.py) whose awaited audits have all ended is woken
  (its parked job sent), in case the wake of the job that ended the last of them was lost with its process.
Recovery after a worker dies: at most lease TTL + one interval (+ the time to load the model and redo the work
that was not cached). Every ``maintenance_interval_seconds`` it also applies the retention policy.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import and_, or_, select

from app.audits.kinds import AuditKind, KindRegistry
from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import Audit
from app.db.models.audit import AuditStatus
from app.queue import Dispatcher
from app.reliability import leases, waits
from app.settings import Settings, get_settings
from app.subjects.retention import purge

log = logging.getLogger("memaudit.reconciler")
BATCH = 500  # audits looked at per query: a backlog of any size is worked through in bounded steps


@dataclass
class Report:
    recovered: list[str] = field(default_factory=list)  # running audits whose worker died, re-enqueued
    given_up: list[str] = field(default_factory=list)  # ... failed after max_attempts
    enqueued: list[str] = field(default_factory=list)  # queued audits that no job would have run
    woken: list[str] = field(default_factory=list)  # waiting audits whose awaited audits had all ended


def _recover_expired(settings: Settings, dispatcher: Dispatcher, report: Report, kinds: KindRegistry) -> None:
    with session_scope() as s:
        dead = leases.expired(s)[:BATCH]
    for audit_id, kind, attempts in dead:
        if kind not in kinds:  # a kind this process does not offer: another process's reconciler recovers it
            continue
        with session_scope() as s:
            if attempts >= settings.max_attempts:
                message = (
                    f"the worker running this audit stopped {attempts} times (crash, out of memory, or lost "
                    "host); not retried again — check the worker logs, then submit it again"
                )
                if leases.take_over_expired(
                    s, audit_id, status=AuditStatus.FAILED, finished_at=utcnow(), error=message
                ):
                    report.given_up.append(audit_id)
                continue
            if not leases.take_over_expired(s, audit_id, status=leases.QUEUED):
                continue  # renewed meanwhile, or another reconciler was first
        dispatcher.discard([audit_id])  # the dead run's job record
        lane_, key = _route_of(settings, kinds, audit_id)
        dispatcher.send(kinds[kind].job, audit_id, lane=lane_, key=key)
        report.recovered.append(audit_id)


def _enqueue_missing(settings: Settings, dispatcher: Dispatcher, report: Report, kinds: KindRegistry) -> None:
    now = utcnow()
    cutoff = now - timedelta(seconds=settings.reconcile_grace_seconds)
    batch_cutoff = now - timedelta(seconds=settings.reconcile_batch_grace_seconds)
    # a batch still being enqueued by the API is not "missing": enqueueing it again would double its Redis traffic
    old_enough = or_(and_(Audit.batch_id.is_(None), Audit.created_at < cutoff), Audit.created_at < batch_cutoff)
    last = ""
    while True:
        with session_scope() as s:
            stmt = (
                select(Audit.id, Audit.kind, Audit.batch_id, Audit.owner_key_id)
                .where(Audit.status == leases.QUEUED, old_enough, Audit.id > last)
                .order_by(Audit.id)
                .limit(BATCH)
            )
            rows = [tuple(r) for r in s.execute(stmt)]
        if not rows:
            return
        kind_of = {audit_id: kind for audit_id, kind, _, _ in rows if kind in kinds}
        keys = {audit_id: key for audit_id, _, _, key in rows}
        lanes = {
            audit_id: lane(settings, kinds[kind], batch_id, key)
            for audit_id, kind, batch_id, key in rows
            if kind in kinds
        }
        for audit_id in dispatcher.missing(list(kind_of)):
            dispatcher.send(kinds[kind_of[audit_id]].job, audit_id, lane=lanes.get(audit_id), key=keys.get(audit_id))
            report.enqueued.append(audit_id)
        last = rows[-1][0]


def lane(settings: Settings, kind: AuditKind, batch_id: str | None, owner_key_id: int | None) -> int | None:
    """Where a re-enqueued audit waits (app.queue: fair scheduling): a batch audit on its key's batch lane, a
    background kind's (the service's nulls) on a lane too, any other audit on its key's interactive lane (None:
    the dispatcher picks it from the owner key)."""
    return kind.lane(settings, batch_id, owner_key_id)  # decided once, on the kind (app/audits/kinds.py)


def _route_of(settings: Settings, kinds: KindRegistry, audit_id: str) -> tuple[int | None, int | None]:
    """(batch lane or None, owner key) of an audit to enqueue again."""
    with session_scope() as s:
        row = s.execute(select(Audit.kind, Audit.batch_id, Audit.owner_key_id).where(Audit.id == audit_id)).first()
    if row is None:
        return None, None
    return lane(settings, kinds[row.kind], row.batch_id, row.owner_key_id), row.owner_key_id


def reconcile_once(settings: Settings, dispatcher: Dispatcher, kinds: KindRegistry) -> Report:
    report = Report()
    _recover_expired(settings, dispatcher, report, kinds)
    _enqueue_missing(settings, dispatcher, report, kinds)
    with session_scope() as s:
        report.woken = waits.ready(s)
    if report.woken:
        dispatcher.wake(report.woken)
    if report.recovered or report.enqueued or report.given_up:
        # queued work it enqueued (an embedded process or a command starting up with what an earlier one left) is
        # routine; a dead worker's audit, or one given up, is worth a warning
        log.log(
            logging.WARNING if report.recovered or report.given_up else logging.INFO,
            "reconciler: re-enqueued %d audits whose worker died, enqueued %d queued audits the queue did "
            "not hold, failed %d after %d attempts",
            len(report.recovered),
            len(report.enqueued),
            len(report.given_up),
            settings.max_attempts,
        )
    return report


class Reconciler:
    """Runs ``reconcile_once`` (and the retention purge) in a daemon thread until stopped, or until this
    process switches to another database or queue (tests do)."""

    def __init__(self, settings: Settings, dispatcher: Dispatcher, kinds: KindRegistry) -> None:
        self.settings, self.dispatcher, self.kinds = settings, dispatcher, kinds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memaudit-reconciler", daemon=True)
        self._last_maintenance = float("-inf")

    def start(self) -> Reconciler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _same_config(self) -> bool:
        now = get_settings()
        return (now.database_url, now.redis_url) == (self.settings.database_url, self.settings.redis_url)

    def _loop(self) -> None:
        while not self._stop.is_set() and self._same_config():
            try:
                reconcile_once(self.settings, self.dispatcher, self.kinds)
                if time.monotonic() - self._last_maintenance >= self.settings.maintenance_interval_seconds:
                    self._last_maintenance = time.monotonic()
                    self._maintain()
            except Exception as exc:  # the database or Redis is down: try again next round
                log.warning(
                    "reconciler pass failed (%s); retrying in %.0f s",
                    type(exc).__name__,
                    self.settings.reconcile_interval_seconds,
                )
            # Jitter keeps many workers' passes apart.
            self._stop.wait(self.settings.reconcile_interval_seconds * random.uniform(0.8, 1.2))

    def _maintain(self) -> None:
        if self.settings.retention_days is not None:
            purge(self.settings, self.dispatcher)
