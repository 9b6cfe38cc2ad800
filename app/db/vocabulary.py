"""The closed vocabularies the database stores, one class for each list: audit statuses, key roles, capacity cell
and dump import statuses. Standard library only, so that the command line and the dashboard's templates read them
without loading the database layer (the models in app/db/models re-export them)."""

from __future__ import annotations

from enum import StrEnum


class AuditStatus(StrEnum):
    """An audit's life: queued -> running -> succeeded | failed; cancelled from queued or running."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE_STATUSES = (AuditStatus.QUEUED, AuditStatus.RUNNING)
FINAL_STATUSES = (AuditStatus.SUCCEEDED, AuditStatus.FAILED, AuditStatus.CANCELLED)


class Role(StrEnum):
    """What an API key may do: the one list of roles (the API, the command line and the dashboard read it)."""

    ADMIN = "admin"  # everything
    AUDITOR = "auditor"  # submits audits, reads its own
    REGULATOR = "regulator"  # reads every audit, exports nothing
    PIPELINE = "pipeline"  # exports forget sets only


ROLES = tuple(Role)


class CellStatus(StrEnum):
    """A capacity grid cell's life (not its audit's): pending until a job trains it, done once measured."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"


class ImportStatus(StrEnum):
    """A dump import's life (not an audit's: see AuditStatus): running until its last batch commits."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"


class RequestState(StrEnum):
    """A person's request (app/requests): received -> identity_checked -> audited -> delivered -> verified ->
    answered, or refused (with a reason) from any state before answered. An access-only request may be answered
    once audited (nothing to deliver or verify)."""

    RECEIVED = "received"
    IDENTITY_CHECKED = "identity_checked"
    AUDITED = "audited"
    DELIVERED = "delivered"
    VERIFIED = "verified"
    ANSWERED = "answered"
    REFUSED = "refused"


class Right(StrEnum):
    """The rights a person's request invokes (GDPR Art. 15, 17, 16)."""

    ACCESS = "access"
    ERASURE = "erasure"
    RECTIFICATION = "rectification"


class IdentityCheck(StrEnum):
    """Where checking the requester's identity stands (Art. 12(6))."""

    PENDING = "pending"
    VERIFIED = "verified"
    FAILED = "failed"


class RecipientKind(StrEnum):
    """Who a forget set is delivered to (Art. 19: each recipient of the personal data is told)."""

    UNLEARNING_PIPELINE = "unlearning_pipeline"
    DEPLOYMENT = "deployment"
