"""Every table, imported so that Base.metadata knows them all (Alembic autogenerate, tests)."""

from app.db.models.audit import Audit, IdempotencyKey
from app.db.models.auth import ApiKey
from app.db.models.batch import Batch  # noqa: F401
from app.db.models.cache import NllCache
from app.db.models.capacity import CapacityCell, CapacityText  # noqa: F401
from app.db.models.dataset import CoverageAudit, CoverageResult, Dataset, DatasetFile, DatasetRecord  # noqa: F401
from app.db.models.dynamics import DynamicsAudit, DynamicsString  # noqa: F401
from app.db.models.evidence import EvidenceEntry, EvidenceHead  # noqa: F401
from app.db.models.null import NullDistribution, NullFact  # noqa: F401
from app.db.models.privacy import AccessLog, RevokedSubjectToken  # noqa: F401
from app.db.models.requests import Delivery, PersonRequest, Recipient, RequestAudit  # noqa: F401
from app.db.models.subject import Fact, PropertyRow, Subject, Template
from app.db.models.ui_session import DashboardSession  # noqa: F401
from app.db.models.verification import VerificationFact, VerificationPerson  # noqa: F401
from app.db.models.wikidata import PoolValue, WikidataImport, WikidataProperty  # noqa: F401
from app.db.models.wikimem import Canary, CandidateScore, CounterfactualValue, FactResult

__all__ = [
    "ApiKey",
    "Audit",
    "CandidateScore",
    "Canary",
    "CounterfactualValue",
    "Fact",
    "FactResult",
    "IdempotencyKey",
    "NllCache",
    "PropertyRow",
    "Subject",
    "Template",
]
