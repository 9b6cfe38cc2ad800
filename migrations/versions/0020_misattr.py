"""misattribution (issue 42): fact_results.misattribution and fact_results.misattributed_value (the best false
candidate's mean lead over the templates, and that value), null_facts.misattribution (the same statistic of a
fictitious person's fact); null on rows from before it (their misattribution reads `uncalibrated`)

Revision ID: 0020_misattr
Revises: 0019_gen_generation
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_misattr"
down_revision: str | Sequence[str] | None = "0019_gen_generation"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("fact_results") as t:
        t.add_column(sa.Column("misattribution", sa.Float(), nullable=True))
        t.add_column(sa.Column("misattributed_value", sa.Text(), nullable=True))
    with op.batch_alter_table("null_facts") as t:
        t.add_column(sa.Column("misattribution", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("null_facts") as t:
        t.drop_column("misattribution")
    with op.batch_alter_table("fact_results") as t:
        t.drop_column("misattributed_value")
        t.drop_column("misattribution")
