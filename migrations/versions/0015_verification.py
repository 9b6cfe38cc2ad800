"""verification (issue 26): reserved, filled by the engineer who owns it (empty until then)

Revision ID: 0015_verification
Revises: 0014_verdicts
Create Date: 2026-11-26
"""

from collections.abc import Sequence

revision: str = "0015_verification"
down_revision: str | Sequence[str] | None = "0014_verdicts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
