"""hardening: server-side dashboard sessions (ui_sessions); idempotency keys stored as their SHA-256

Revision ID: 0012_hardening
Revises: 0011_batches
Create Date: 2026-11-26
"""

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_hardening"
down_revision: str | Sequence[str] | None = "0011_batches"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, column) holding a client's Idempotency-Key: from now on its SHA-256 (hex), never the key itself
IDEMPOTENCY_COLUMNS = (("idempotency_keys", "key"), ("batches", "idempotency_key"))


def upgrade() -> None:
    op.create_table(
        "ui_sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("principal", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.Integer(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"], ["api_keys.id"], name=op.f("fk_ui_sessions_key_id_api_keys"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ui_sessions")),
    )
    op.create_index(op.f("ix_ui_sessions_principal"), "ui_sessions", ["principal"])
    op.create_index(op.f("ix_ui_sessions_key_id"), "ui_sessions", ["key_id"])
    op.create_index(op.f("ix_ui_sessions_expires_at"), "ui_sessions", ["expires_at"])
    # Keys stored before this revision: replaced by their digest, so that a retry with the same key still matches.
    conn = op.get_bind()
    for table, column in IDEMPOTENCY_COLUMNS:
        rows = conn.execute(sa.text(f"SELECT id, {column} FROM {table} WHERE {column} IS NOT NULL")).all()
        for row_id, key in rows:
            digest = hashlib.sha256(key.encode()).hexdigest()
            conn.execute(sa.text(f"UPDATE {table} SET {column} = :d WHERE id = :i"), {"d": digest, "i": row_id})


def downgrade() -> None:
    # The stored digests stay digests (a key cannot be recovered from its hash): a client retrying with a key it
    # used before this revision's downgrade gets a new audit instead of the old one.
    op.drop_index(op.f("ix_ui_sessions_expires_at"), table_name="ui_sessions")
    op.drop_index(op.f("ix_ui_sessions_key_id"), table_name="ui_sessions")
    op.drop_index(op.f("ix_ui_sessions_principal"), table_name="ui_sessions")
    op.drop_table("ui_sessions")
