"""wikimem: Wikidata dump imports (resumable checkpoints), property metadata, dump-built pools

Revision ID: 0002_wikimem
Revises: 0001_spine
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002_wikimem"
down_revision: str | Sequence[str] | None = "0001_spine"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "wikidata_imports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(length=1000), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("last_line", sa.Integer(), nullable=False),
        sa.Column("humans", sa.Integer(), nullable=False),
        sa.Column("facts", sa.Integer(), nullable=False),
        sa.Column("skipped_humans", sa.Integer(), nullable=False),
        sa.Column("bad_lines", sa.Integer(), nullable=False),
        sa.Column("bad_line_numbers", JSON, nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_wikidata_imports")),
    )
    with op.batch_alter_table("wikidata_imports", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_wikidata_imports_fingerprint"), ["fingerprint"], unique=False)

    op.create_table(
        "wikidata_properties",
        sa.Column("pid", sa.String(length=16), nullable=False),
        sa.Column("label", sa.String(length=300), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("aliases", JSON, nullable=False),
        sa.Column("datatype", sa.String(length=32), nullable=False),
        sa.Column("import_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["import_id"],
            ["wikidata_imports.id"],
            name=op.f("fk_wikidata_properties_import_id_wikidata_imports"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("pid", name=op.f("pk_wikidata_properties")),
    )

    op.create_table(
        "pool_values",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("import_id", sa.Integer(), nullable=False),
        sa.Column("property_id", sa.String(length=16), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("humans", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["import_id"],
            ["wikidata_imports.id"],
            name=op.f("fk_pool_values_import_id_wikidata_imports"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pool_values")),
    )
    with op.batch_alter_table("pool_values", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pool_values_import_id"), ["import_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_pool_values_property_id"), ["property_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("pool_values", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pool_values_property_id"))
        batch_op.drop_index(batch_op.f("ix_pool_values_import_id"))
    op.drop_table("pool_values")
    op.drop_table("wikidata_properties")
    with op.batch_alter_table("wikidata_imports", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_wikidata_imports_fingerprint"))
    op.drop_table("wikidata_imports")
