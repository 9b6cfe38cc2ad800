"""null: null calibration of subject audits (null distributions per model/property/configuration, null facts)

Revision ID: 0007_null
Revises: 0005_dynamics
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007_null"
down_revision: str | Sequence[str] | None = "0005_dynamics"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "null_distributions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("audit_id", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=300), nullable=False),
        sa.Column("property_id", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("config", JSON, nullable=False),
        sa.Column("method", sa.String(length=16), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=True),
        sa.Column("people", sa.Integer(), nullable=True),
        sa.Column("n_facts", sa.Integer(), nullable=True),
        sa.Column("summary", JSON, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_null_distributions_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_null_distributions")),
    )
    with op.batch_alter_table("null_distributions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_null_distributions_audit_id"), ["audit_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_null_distributions_model"), ["model"], unique=False)
        batch_op.create_index(batch_op.f("ix_null_distributions_key"), ["key"], unique=False)
        batch_op.create_index(batch_op.f("ix_null_distributions_fingerprint"), ["fingerprint"], unique=False)

    op.create_table(
        "null_facts",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("distribution_id", sa.Integer(), nullable=False),
        sa.Column("person", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("assigned", sa.Boolean(), nullable=False),
        sa.Column("share", sa.Float(), nullable=False),
        sa.Column("strict", sa.Boolean(), nullable=False),
        sa.Column("lenient", sa.Boolean(), nullable=False),
        sa.Column("z_star", sa.Float(), nullable=True),
        sa.Column("n_templates", sa.Integer(), nullable=False),
        sa.Column("n_z", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["distribution_id"],
            ["null_distributions.id"],
            name=op.f("fk_null_facts_distribution_id_null_distributions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_null_facts")),
    )
    with op.batch_alter_table("null_facts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_null_facts_distribution_id"), ["distribution_id"], unique=False)


def downgrade() -> None:
    op.drop_table("null_facts")
    op.drop_table("null_distributions")
