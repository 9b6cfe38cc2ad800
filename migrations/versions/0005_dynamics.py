"""dynamics: training-dynamics audits (strings and their loss trajectories)

Revision ID: 0005_dynamics
Revises: 0001_spine
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005_dynamics"
down_revision: str | Sequence[str] | None = "0001_spine"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "dynamics_audits",
        sa.Column("audit_id", sa.String(length=32), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("recipe", sa.String(length=16), nullable=False),
        sa.Column("n_strings", sa.Integer(), nullable=False),
        sa.Column("passes", sa.Integer(), nullable=False),
        sa.Column("epochs", JSON, nullable=True),
        sa.Column("language", JSON, nullable=True),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_dynamics_audits_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("audit_id", name=op.f("pk_dynamics_audits")),
    )
    op.create_table(
        "dynamics_strings",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("audit_id", sa.String(length=32), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("string_id", sa.String(length=200), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("frequency", sa.Float(), nullable=True),
        sa.Column("probability", sa.Float(), nullable=True),
        sa.Column("fold", sa.Integer(), nullable=True),
        sa.Column("train_loss", JSON, nullable=True),
        sa.Column("heldout_loss", JSON, nullable=True),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_dynamics_strings_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dynamics_strings")),
        sa.UniqueConstraint("audit_id", "position", name="uq_dynamics_strings_position"),
        sa.UniqueConstraint("audit_id", "string_id", name="uq_dynamics_strings_string_id"),
    )
    with op.batch_alter_table("dynamics_strings", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dynamics_strings_audit_id"), ["audit_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("dynamics_strings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dynamics_strings_audit_id"))
    op.drop_table("dynamics_strings")
    op.drop_table("dynamics_audits")
