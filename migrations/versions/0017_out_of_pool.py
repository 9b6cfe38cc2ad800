"""out-of-pool null facts (issue 22): null_facts.in_pool (false: the null fact's true value is outside the
counterfactual pool, drawn from core.names.out_of_pool; rows from before it are in the pool)

Revision ID: 0017_out_of_pool
Revises: 0016_null_artifacts
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_out_of_pool"
down_revision: str | Sequence[str] | None = "0016_null_artifacts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("null_facts") as t:
        t.add_column(sa.Column("in_pool", sa.Boolean(), nullable=False, server_default=sa.true()))


def downgrade() -> None:
    with op.batch_alter_table("null_facts") as t:
        t.drop_column("in_pool")
