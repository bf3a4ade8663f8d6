"""signed_requests: each signed Slack request taken, kept for Slack's replay window, so a
copy sent to another replica, or to this one after a restart, is refused as a replay

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A new table, empty: what each replica remembered in memory before is at most 5 minutes
    # of signatures, and a restart for the upgrade forgot it anyway.
    op.create_table(
        "signed_requests",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_signed_requests_sent_at", "signed_requests", ["sent_at"])


def downgrade() -> None:
    op.drop_index("ix_signed_requests_sent_at", table_name="signed_requests")
    op.drop_table("signed_requests")
