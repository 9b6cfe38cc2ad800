"""values: candidate_scores.nll_generic nullable (not scored where α = 1 makes it cancel)

Revision ID: 0006_values
Revises: 0005_dynamics
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_values"
down_revision: str | Sequence[str] | None = "0005_dynamics"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("candidate_scores") as batch:
        batch.alter_column("nll_generic", existing_type=sa.Float(), nullable=True)


def downgrade() -> None:
    # Rows stored without a generic NLL get 0.0: with α = 1 it cancels from the score, so nothing changes.
    op.execute("UPDATE candidate_scores SET nll_generic = 0.0 WHERE nll_generic IS NULL")
    with op.batch_alter_table("candidate_scores") as batch:
        batch.alter_column("nll_generic", existing_type=sa.Float(), nullable=False)
