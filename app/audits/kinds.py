"""The registry of audit kinds. A kind brings its request schema, a `prepare` step that validates the
request against the database and creates the kind's rows, and the dotted path of its job."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Union

from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from app.capacity.schemas import SCRATCH, CapacityAuditCreate
from app.capacity.service import prepare_capacity_audit
from app.coverage.schemas import CoverageAuditCreate
from app.coverage.service import prepare_coverage_audit
from app.db.models import Audit
from app.dynamics.schemas import DynamicsAuditCreate
from app.dynamics.service import prepare_dynamics_audit
from app.nulls.request import NullAuditCreate
from app.nulls.service import prepare_null_audit
from app.settings import Settings
from app.subjects.schemas import SubjectAuditCreate
from app.subjects.service import prepare_subject_audit

Prepare = Callable[[Session, Any, Audit, Settings], None]


@dataclass(frozen=True)
class AuditKind:
    name: str
    schema: type[BaseModel]
    prepare: Prepare
    job: str
    # `model` values the kind itself understands besides registered models (e.g. capacity's "scratch").
    own_models: tuple[str, ...] = ()


KINDS: dict[str, AuditKind] = {}


def register(kind: AuditKind) -> None:
    KINDS[kind.name] = kind


register(AuditKind("subject", SubjectAuditCreate, prepare_subject_audit, "workers.jobs.subject.run"))
register(AuditKind("coverage", CoverageAuditCreate, prepare_coverage_audit, "workers.jobs.coverage.run"))
register(
    AuditKind("capacity", CapacityAuditCreate, prepare_capacity_audit, "workers.jobs.capacity.run", (SCRATCH,))
)
register(AuditKind("dynamics", DynamicsAuditCreate, prepare_dynamics_audit, "workers.jobs.dynamics.run"))
register(AuditKind("null", NullAuditCreate, prepare_null_audit, "workers.jobs.null.run"))


def audit_create_type() -> Any:
    """The POST /audits body: the union of every registered kind's schema, discriminated by `kind`."""
    schemas = tuple(k.schema for k in KINDS.values())
    if len(schemas) == 1:
        return schemas[0]
    return Annotated[Union[schemas], Field(discriminator="kind")]  # noqa: UP007
