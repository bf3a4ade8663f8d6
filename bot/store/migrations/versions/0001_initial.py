"""initial schema: signals, incidents, timeline, requests, approvals, executions

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("cluster", sa.String(length=100), nullable=False),
        sa.Column("subject", sa.String(length=300), nullable=False),
        sa.Column("node", sa.String(length=253), nullable=True),
        sa.Column("pool", sa.String(length=253), nullable=True),
        sa.Column("rule", sa.String(length=100), nullable=False),
        sa.Column("state", sa.String(length=30), nullable=False),
        sa.Column("severity", sa.String(length=20), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reopened", sa.Integer(), server_default="0", nullable=False),
        sa.Column("parent", sa.Integer(), nullable=True),
        sa.Column("chat_ref", sa.String(length=200), nullable=True),
        sa.Column("diagnosis", sa.JSON(), nullable=True),
        sa.Column("signals", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent"],
            ["incidents.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_incidents_node"), ["node"], unique=False)
        batch_op.create_index(
            "one_unresolved_incident_per_subject",
            ["cluster", "subject", "rule"],
            unique=True,
            sqlite_where=sa.text("state != 'resolved'"),
            postgresql_where=sa.text("state != 'resolved'"),
        )

    op.create_table(
        "signals",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("dedup_key", sa.String(length=300), nullable=False),
        sa.Column("fingerprint", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("node", sa.String(length=253), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("truncated_alerts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("dedup_key"),
    )
    with op.batch_alter_table("signals", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_signals_fingerprint"), ["fingerprint"], unique=False)
        batch_op.create_index(batch_op.f("ix_signals_node"), ["node"], unique=False)

    op.create_table(
        "action_requests",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=True),
        sa.Column("node", sa.String(length=253), nullable=False),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("action_requests", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_action_requests_incident_id"), ["incident_id"], unique=False
        )

    op.create_table(
        "timeline",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=30), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("timeline", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_timeline_incident_id"), ["incident_id"], unique=False)

    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("approver", sa.String(length=200), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["action_requests.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("request_id", "approver", name="one_vote_per_person"),
    )
    op.create_table(
        "executions",
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("executor", sa.String(length=200), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("detail", sa.Text(), server_default="", nullable=False),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["action_requests.id"],
        ),
        sa.PrimaryKeyConstraint("request_id"),
    )


def downgrade() -> None:
    op.drop_table("executions")
    op.drop_table("approvals")
    with op.batch_alter_table("timeline", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_timeline_incident_id"))

    op.drop_table("timeline")
    with op.batch_alter_table("action_requests", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_action_requests_incident_id"))

    op.drop_table("action_requests")
    with op.batch_alter_table("signals", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_signals_node"))
        batch_op.drop_index(batch_op.f("ix_signals_fingerprint"))

    op.drop_table("signals")
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.drop_index(
            "one_unresolved_incident_per_subject",
            sqlite_where=sa.text("state != 'resolved'"),
            postgresql_where=sa.text("state != 'resolved'"),
        )
        batch_op.drop_index(batch_op.f("ix_incidents_node"))

    op.drop_table("incidents")
