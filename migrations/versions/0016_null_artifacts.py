"""null artifacts (issue 23): where a null came from (computed here, imported from a file, or shipped with the
package) and the artifact's digest, by which an import is idempotent (null_distributions.source, artifact_sha256)

Revision ID: 0016_null_artifacts
Revises: 0015_verification
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_null_artifacts"
down_revision: str | Sequence[str] | None = "0015_verification"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("null_distributions") as t:
        t.add_column(sa.Column("source", sa.String(length=16), nullable=True))
        t.add_column(sa.Column("artifact_sha256", sa.String(length=64), nullable=True))
        t.create_index(t.f("ix_null_distributions_artifact_sha256"), ["artifact_sha256"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("null_distributions") as t:
        t.drop_index(t.f("ix_null_distributions_artifact_sha256"))
        t.drop_column("artifact_sha256")
        t.drop_column("source")
