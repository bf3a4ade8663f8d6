"""alert_state: where each alert stands now, so diagnosis reads firing alerts as counts per
node, name, GPU and Xid instead of loading every firing signal

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_BATCH = 1000


def upgrade() -> None:
    state = op.create_table(
        "alert_state",
        sa.Column("fingerprint", sa.String(200), primary_key=True),
        sa.Column("signal_id", sa.Integer, sa.ForeignKey("signals.id"), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("node", sa.String(253), nullable=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("gpu", sa.String(200), nullable=True),
        sa.Column("xid", sa.String(50), nullable=True),
    )
    op.create_index(
        "firing_alert_groups",
        "alert_state",
        ["node", "name", "gpu", "xid", "signal_id"],
        sqlite_where=sa.text("status = 'firing'"),
        postgresql_where=sa.text("status = 'firing'"),
    )
    assert state is not None
    # The signals already stored: each alert's latest one, read in batches so a large store
    # is not loaded at once. The payload is JSON text on SQLite and json on PostgreSQL.
    signals = sa.table(
        "signals",
        sa.column("id", sa.Integer),
        sa.column("fingerprint", sa.String),
        sa.column("status", sa.String),
        sa.column("node", sa.String),
        sa.column("name", sa.String),
        sa.column("payload", sa.JSON),
    )
    bind = op.get_bind()
    latest = (
        sa.select(sa.func.max(signals.c.id))
        .group_by(signals.c.fingerprint)
        .order_by(sa.func.max(signals.c.id))
    )
    ids = [int(i) for i in bind.scalars(latest)]
    for start in range(0, len(ids), _BATCH):
        chunk = ids[start : start + _BATCH]
        rows = bind.execute(
            sa.select(
                signals.c.id,
                signals.c.fingerprint,
                signals.c.status,
                signals.c.node,
                signals.c.name,
                signals.c.payload,
            ).where(signals.c.id.in_(chunk))
        )
        values: list[dict[str, Any]] = []
        for row in rows:
            payload = row.payload if isinstance(row.payload, dict) else {}
            gpu = payload.get("gpu")
            xid = (payload.get("labels") or {}).get("xid")
            values.append(
                {
                    "fingerprint": row.fingerprint,
                    "signal_id": row.id,
                    "status": row.status,
                    "node": row.node,
                    "name": row.name,
                    "gpu": str(gpu)[:200] if gpu is not None else None,
                    "xid": str(xid)[:50] if xid is not None else None,
                }
            )
        if values:
            bind.execute(sa.insert(state), values)


def downgrade() -> None:
    op.drop_index("firing_alert_groups", table_name="alert_state")
    op.drop_table("alert_state")
