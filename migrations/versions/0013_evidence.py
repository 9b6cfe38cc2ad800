"""evidence: the provenance of every audit, and the signed, hash-chained evidence record (app/evidence)

Revision ID: 0013_evidence
Revises: 0012_hardening
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0013_evidence"
down_revision: str | Sequence[str] | None = "0012_hardening"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")
GENESIS = "0" * 64  # app.evidence.chain.GENESIS: the hash before the first entry


def upgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.add_column(sa.Column("provenance", JSON_TYPE, nullable=True))
    op.create_table(
        "evidence_entries",
        sa.Column("seq", BIG_ID, autoincrement=False, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("subject_ref", sa.String(length=64), nullable=True),
        sa.Column("audit_id", sa.String(length=32), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=16), nullable=False),
        sa.Column("signature", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_evidence_entries")),
    )
    op.create_index(op.f("ix_evidence_entries_at"), "evidence_entries", ["at"])
    op.create_index(op.f("ix_evidence_entries_kind"), "evidence_entries", ["kind"])
    op.create_index(op.f("ix_evidence_entries_subject_ref"), "evidence_entries", ["subject_ref"])
    op.create_index(op.f("ix_evidence_entries_audit_id"), "evidence_entries", ["audit_id"])
    head = op.create_table(
        "evidence_head",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("seq", BIG_ID, nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evidence_head")),
    )
    op.bulk_insert(head, [{"id": 1, "seq": 0, "hash": GENESIS}])


def downgrade() -> None:
    op.drop_table("evidence_head")
    op.drop_index(op.f("ix_evidence_entries_audit_id"), table_name="evidence_entries")
    op.drop_index(op.f("ix_evidence_entries_subject_ref"), table_name="evidence_entries")
    op.drop_index(op.f("ix_evidence_entries_kind"), table_name="evidence_entries")
    op.drop_index(op.f("ix_evidence_entries_at"), table_name="evidence_entries")
    op.drop_table("evidence_entries")
    with op.batch_alter_table("audits") as batch:
        batch.drop_column("provenance")
