"""verdicts: the verdict statistic and the fact's shape on results and null facts (fact_results.statistic, n_values,
in_pool; null_facts.statistic, n_values)

Revision ID: 0014_verdicts
Revises: 0013_evidence
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_verdicts"
down_revision: str | Sequence[str] | None = "0013_evidence"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = ("0002_wikimem", "0007_null")  # the tables it alters


def upgrade() -> None:
    with op.batch_alter_table("fact_results") as t:
        t.add_column(sa.Column("statistic", sa.Float(), nullable=True))
        t.add_column(sa.Column("n_values", sa.Integer(), nullable=True))
        t.add_column(sa.Column("in_pool", sa.Boolean(), nullable=True))
    with op.batch_alter_table("null_facts") as t:
        t.add_column(sa.Column("statistic", sa.Float(), nullable=True))
        t.add_column(sa.Column("n_values", sa.Integer(), nullable=False, server_default="1"))


def downgrade() -> None:
    with op.batch_alter_table("null_facts") as t:
        t.drop_column("n_values")
        t.drop_column("statistic")
    with op.batch_alter_table("fact_results") as t:
        t.drop_column("in_pool")
        t.drop_column("n_values")
        t.drop_column("statistic")
