"""null artifacts (issue 23): reserved, filled by the engineer who owns it (empty until then)

Revision ID: 0016_null_artifacts
Revises: 0015_verification
Create Date: 2026-11-26
"""

from collections.abc import Sequence

revision: str = "0016_null_artifacts"
down_revision: str | Sequence[str] | None = "0015_verification"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
