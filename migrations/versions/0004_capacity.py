"""capacity: grid cells (every recorded number, resumable checkpoint) and text-mode samples

Revision ID: 0004_capacity
Revises: 0001_spine
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004_capacity"
down_revision: str | Sequence[str] | None = "0001_spine"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "capacity_cells",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("audit_id", sa.String(length=32), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("n_layer", sa.Integer(), nullable=False),
        sa.Column("d_model", sa.Integer(), nullable=False),
        sa.Column("n_head", sa.Integer(), nullable=False),
        sa.Column("vocab_size", sa.Integer(), nullable=False),
        sa.Column("seq_len", sa.Integer(), nullable=False),
        sa.Column("n_samples", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("precision", sa.String(length=8), nullable=False),
        sa.Column("params", sa.BigInteger(), nullable=False),
        sa.Column("entropy_bits", sa.Float(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("steps_done", sa.Integer(), nullable=False),
        sa.Column("steps_total", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("memorized_bits", sa.Float(), nullable=True),
        sa.Column("bits_per_param", sa.Float(), nullable=True),
        sa.Column("train_bits_per_token", sa.Float(), nullable=True),
        sa.Column("heldout_bits_per_token", sa.Float(), nullable=True),
        sa.Column("mia_f1", sa.Float(), nullable=True),
        sa.Column("mia_auc", sa.Float(), nullable=True),
        sa.Column("extraction_rate", sa.Float(), nullable=True),
        sa.Column("curve", JSON, nullable=False),
        sa.Column("checkpoint", sa.LargeBinary(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_capacity_cells_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_capacity_cells")),
        sa.UniqueConstraint("audit_id", "position", name=op.f("uq_capacity_cells_audit_id")),
    )
    with op.batch_alter_table("capacity_cells", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_capacity_cells_audit_id"), ["audit_id"], unique=False)

    op.create_table(
        "capacity_texts",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("audit_id", sa.String(length=32), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("nll_target_bits", sa.Float(), nullable=True),
        sa.Column("nll_reference_bits", sa.Float(), nullable=True),
        sa.Column("memorized_bits", sa.Float(), nullable=True),
        sa.Column("rarity", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_capacity_texts_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_capacity_texts")),
        sa.UniqueConstraint("audit_id", "position", name=op.f("uq_capacity_texts_audit_id")),
    )
    with op.batch_alter_table("capacity_texts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_capacity_texts_audit_id"), ["audit_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("capacity_texts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_capacity_texts_audit_id"))
    op.drop_table("capacity_texts")
    with op.batch_alter_table("capacity_cells", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_capacity_cells_audit_id"))
    op.drop_table("capacity_cells")
