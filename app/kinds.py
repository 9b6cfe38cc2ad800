"""The composition root of audit kinds: the kinds this service offers, in the order the API documents them.

Adding a kind: write its package (schemas with a create and an options model, a prepare step, a router, and
``kind.py`` declaring ``KIND``), its job module under ``workers/jobs/``, its tables under ``app/db/models/`` (listed
in the models index) with a migration, and list its ``KIND`` here. Nothing in ``app/audits`` changes."""

from __future__ import annotations

from app.audits.kinds import KindRegistry
from app.capacity.kind import KIND as CAPACITY
from app.coverage.kind import KIND as COVERAGE
from app.dynamics.kind import KIND as DYNAMICS
from app.nulls.kind import KIND as NULL
from app.subjects.kind import KIND as SUBJECT
from app.verification.kind import KIND as VERIFICATION

KINDS = KindRegistry([SUBJECT, COVERAGE, CAPACITY, DYNAMICS, NULL, VERIFICATION])
