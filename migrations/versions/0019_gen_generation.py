"""generation mode (issue 41): a subject fact's sampled answers, read (fact_results.generation)

Revision ID: 0019_gen_generation
Revises: 0018_request_requests
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0019_gen_generation"
down_revision: str | Sequence[str] | None = "0018_request_requests"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("fact_results", sa.Column("generation", JSON, nullable=True))


def downgrade() -> None:
    op.drop_column("fact_results", "generation")
