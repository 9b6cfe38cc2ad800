"""verdicts: (reserved; filled by the verdict work)

Revision ID: 0014_verdicts
Revises: 0013_evidence
Create Date: 2026-11-26
"""

from collections.abc import Sequence

revision: str = "0014_verdicts"
down_revision: str | Sequence[str] | None = "0013_evidence"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
