"""out-of-pool null facts (issue 22): reserved, filled by the engineer who owns it (empty until then)

Revision ID: 0017_out_of_pool
Revises: 0016_null_artifacts
Create Date: 2026-11-26
"""

from collections.abc import Sequence

revision: str = "0017_out_of_pool"
down_revision: str | Sequence[str] | None = "0016_null_artifacts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
