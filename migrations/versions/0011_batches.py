"""batches: cohorts of subject audits submitted as one roster (audits.batch_id, audits.batch_row)

Revision ID: 0011_batches
Revises: 0009_reliability (the lead sets "0010_ui" at merge)
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011_batches"
down_revision: str | Sequence[str] | None = "0009_reliability"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "batches",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("principal", sa.String(length=64), nullable=False),
        sa.Column("owner_key_id", sa.Integer(), nullable=True),
        sa.Column("models", JSON, nullable=False),
        sa.Column("options", JSON, nullable=False),
        sa.Column("people", sa.Integer(), nullable=False),
        sa.Column("rejected", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("request_hash", sa.String(length=64), nullable=True),
        sa.Column("cancelled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_key_id"], ["api_keys.id"], name=op.f("fk_batches_owner_key_id_api_keys"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batches")),
        sa.UniqueConstraint("principal", "idempotency_key", name=op.f("uq_batches_principal")),
    )
    op.create_index(op.f("ix_batches_owner_key_id"), "batches", ["owner_key_id"])
    with op.batch_alter_table("audits") as batch:
        batch.add_column(sa.Column("batch_id", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("batch_row", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_audits_batch_id_batches"), "batches", ["batch_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_index(op.f("ix_audits_batch_id"), ["batch_id"])
        batch.create_index("ix_audits_status_id", ["status", "id"])  # the reconciler's pages of queued audits


def downgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.drop_index("ix_audits_status_id")
        batch.drop_index(op.f("ix_audits_batch_id"))
        batch.drop_constraint(op.f("fk_audits_batch_id_batches"), type_="foreignkey")
        batch.drop_column("batch_row")
        batch.drop_column("batch_id")
    op.drop_index(op.f("ix_batches_owner_key_id"), table_name="batches")
    op.drop_table("batches")
