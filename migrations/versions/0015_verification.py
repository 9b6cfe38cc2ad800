"""verification: the verification audit kind's people and facts (issue 26)

Revision ID: 0015_verification
Revises: 0014_verdicts
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015_verification"
down_revision: str | Sequence[str] | None = "0014_verdicts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = ("0001_spine", "0002_wikimem")  # audits, subjects

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "verification_people",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("audit_id", sa.String(length=32), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("subject_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("before_audit_id", sa.String(length=32), nullable=True),
        sa.Column("exposed", JSON, nullable=True),
        sa.Column("targets", JSON, nullable=True),
        sa.Column("relearned", sa.Boolean(), nullable=False),
        sa.Column("scored", sa.Boolean(), nullable=False),
        sa.Column("summary", JSON, nullable=True),
        sa.ForeignKeyConstraint(
            ["audit_id"], ["audits.id"], name=op.f("fk_verification_people_audit_id_audits"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["before_audit_id"],
            ["audits.id"],
            name=op.f("fk_verification_people_before_audit_id_audits"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["subject_id"], ["subjects.id"], name=op.f("fk_verification_people_subject_id_subjects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_verification_people")),
    )
    with op.batch_alter_table("verification_people", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_verification_people_audit_id"), ["audit_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_verification_people_subject_id"), ["subject_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_verification_people_before_audit_id"), ["before_audit_id"], unique=False)
    op.create_table(
        "verification_facts",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("person_id", BIG_ID, nullable=False),
        sa.Column("audit_id", sa.String(length=32), nullable=False),
        sa.Column("property_id", sa.String(length=20), nullable=False),
        sa.Column("target", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=24), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("p_before", sa.Float(), nullable=True),
        sa.Column("p_after", sa.Float(), nullable=True),
        sa.Column("paired_p", sa.Float(), nullable=True),
        sa.Column("memorized_before", sa.Boolean(), nullable=True),
        sa.Column("memorized_after", sa.Boolean(), nullable=True),
        sa.Column("detail", JSON, nullable=True),
        sa.ForeignKeyConstraint(
            ["person_id"],
            ["verification_people.id"],
            name=op.f("fk_verification_facts_person_id_verification_people"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_verification_facts")),
    )
    with op.batch_alter_table("verification_facts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_verification_facts_person_id"), ["person_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_verification_facts_audit_id"), ["audit_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("verification_facts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_verification_facts_audit_id"))
        batch_op.drop_index(batch_op.f("ix_verification_facts_person_id"))
    op.drop_table("verification_facts")
    with op.batch_alter_table("verification_people", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_verification_people_before_audit_id"))
        batch_op.drop_index(batch_op.f("ix_verification_people_subject_id"))
        batch_op.drop_index(batch_op.f("ix_verification_people_audit_id"))
    op.drop_table("verification_people")
