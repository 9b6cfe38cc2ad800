"""evidence: (reserved; filled by the evidence work)

Revision ID: 0013_evidence
Revises: 0012_hardening
Create Date: 2026-11-26
"""

from collections.abc import Sequence

revision: str = "0013_evidence"
down_revision: str | Sequence[str] | None = "0012_hardening"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
