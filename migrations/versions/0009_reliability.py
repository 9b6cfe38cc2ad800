"""reliability: audit leases (worker heartbeat), the access log (Art. 30) and revoked data-subject tokens

Revision ID: 0009_reliability
Revises: 0005_dynamics
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_reliability"
down_revision: str | Sequence[str] | None = "0005_dynamics"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.add_column(sa.Column("lease_owner", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "access_log",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("principal", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("subject_id", sa.Integer(), nullable=True),
        sa.Column("audit_id", sa.String(length=32), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_access_log")),
    )
    op.create_index(op.f("ix_access_log_at"), "access_log", ["at"])
    op.create_index(op.f("ix_access_log_subject_id"), "access_log", ["subject_id"])
    op.create_index(op.f("ix_access_log_audit_id"), "access_log", ["audit_id"])
    op.create_table(
        "revoked_subject_tokens",
        sa.Column("audit_id", sa.String(length=32), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_by", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_revoked_subject_tokens_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("audit_id", name=op.f("pk_revoked_subject_tokens")),
    )


def downgrade() -> None:
    op.drop_table("revoked_subject_tokens")
    op.drop_index(op.f("ix_access_log_audit_id"), table_name="access_log")
    op.drop_index(op.f("ix_access_log_subject_id"), table_name="access_log")
    op.drop_index(op.f("ix_access_log_at"), table_name="access_log")
    op.drop_table("access_log")
    with op.batch_alter_table("audits") as batch:
        batch.drop_column("lease_expires_at")
        batch.drop_column("lease_owner")
