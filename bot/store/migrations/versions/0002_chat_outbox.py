"""chat outbox

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chat_outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("group_key", sa.String(length=300), nullable=False),
        sa.Column("method", sa.String(length=50), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("refers_to", sa.String(length=300), nullable=True),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    with op.batch_alter_table("chat_outbox", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_chat_outbox_group_key"), ["group_key"], unique=False)
        batch_op.create_index(batch_op.f("ix_chat_outbox_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("chat_outbox", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_chat_outbox_status"))
        batch_op.drop_index(batch_op.f("ix_chat_outbox_group_key"))

    op.drop_table("chat_outbox")
