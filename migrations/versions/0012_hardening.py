"""hardening: (reserved; filled by the hardening work)

Revision ID: 0012_hardening
Revises: 0011_batches
Create Date: 2026-11-26
"""

from collections.abc import Sequence

revision: str = "0012_hardening"
down_revision: str | Sequence[str] | None = "0011_batches"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
