"""a person's request (issue 43): requests, request_audits, recipients, deliveries

Revision ID: 0018_request_requests
Revises: 0017_out_of_pool
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018_request_requests"
down_revision: str | Sequence[str] | None = "0017_out_of_pool"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def _owner() -> sa.Column:
    return sa.Column(
        "owner_key_id", sa.Integer(), sa.ForeignKey("api_keys.id", ondelete="SET NULL", name=None), nullable=True
    )


def upgrade() -> None:
    op.create_table(
        "requests",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("principal", sa.String(64), nullable=False),
        _owner(),
        sa.Column("subject_name", sa.String(200), nullable=False),
        sa.Column("wikidata_id", sa.String(20), nullable=True),
        sa.Column("facts", JSON, nullable=False),
        sa.Column("rights", JSON, nullable=False),
        sa.Column("models", JSON, nullable=False),
        sa.Column("identity_check", sa.String(16), nullable=False),
        sa.Column("received_at", TS, nullable=False),
        sa.Column("due_at", TS, nullable=False),
        sa.Column("extended_at", TS, nullable=True),
        sa.Column("extension_reason", sa.Text(), nullable=True),
        sa.Column("verification_audit_id", sa.String(32), sa.ForeignKey("audits.id", ondelete="SET NULL")),
        sa.Column("verified_forgotten", sa.Boolean(), nullable=True),
        sa.Column("verified_at", TS, nullable=True),
        sa.Column("answered_at", TS, nullable=True),
        sa.Column("refused_at", TS, nullable=True),
        sa.Column("refusal_reason", sa.Text(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_requests_owner_key_id", "requests", ["owner_key_id"])
    op.create_index("ix_requests_received_at", "requests", ["received_at"])
    op.create_index("ix_requests_due_at", "requests", ["due_at"])
    op.create_table(
        "request_audits",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("request_id", sa.String(32), sa.ForeignKey("requests.id", ondelete="CASCADE"), nullable=False),
        sa.Column("model", sa.String(300), nullable=False),
        sa.Column("audit_id", sa.String(32), sa.ForeignKey("audits.id", ondelete="SET NULL"), nullable=True),
        sa.UniqueConstraint("request_id", "model"),
    )
    op.create_index("ix_request_audits_request_id", "request_audits", ["request_id"])
    op.create_index("ix_request_audits_audit_id", "request_audits", ["audit_id"])
    op.create_table(
        "recipients",
        sa.Column("id", sa.String(32), primary_key=True),
        _owner(),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("models", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_recipients_owner_key_id", "recipients", ["owner_key_id"])
    op.create_table(
        "deliveries",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("request_id", sa.String(32), sa.ForeignKey("requests.id", ondelete="CASCADE"), nullable=False),
        sa.Column("recipient_id", sa.String(32), sa.ForeignKey("recipients.id"), nullable=False),
        sa.Column("audit_id", sa.String(32), sa.ForeignKey("audits.id", ondelete="SET NULL"), nullable=True),
        sa.Column("set", sa.String(16), nullable=False),
        sa.Column("policy", sa.String(32), nullable=False),
        sa.Column("records", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("delivered_at", TS, nullable=False),
    )
    op.create_index("ix_deliveries_request_id", "deliveries", ["request_id"])
    op.create_index("ix_deliveries_recipient_id", "deliveries", ["recipient_id"])


def downgrade() -> None:
    for table in ("deliveries", "recipients", "request_audits", "requests"):
        op.drop_table(table)
