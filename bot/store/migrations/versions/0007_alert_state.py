"""alert_state and alert_kinds: where each alert stands now, and how many of each kind (node,
name, GPU, Xid) fire, so diagnosis reads counts instead of loading every firing signal

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_BATCH = 1000


def _kind(node: Any, name: Any, gpu: Any, xid: Any) -> str:
    # A frozen copy of bot.store.signals.kind_of as of this revision.
    gpu = str(gpu)[:200] if gpu else gpu
    parts = (node, name, gpu, xid)
    return "\x1f".join("!" if part is None else f"={part}" for part in parts)[:800]


def upgrade() -> None:
    state = op.create_table(
        "alert_state",
        sa.Column("fingerprint", sa.String(200), primary_key=True),
        sa.Column("signal_id", sa.Integer, sa.ForeignKey("signals.id"), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("kind", sa.String(800), nullable=False),
    )
    op.create_index(
        "firing_alerts_by_kind",
        "alert_state",
        ["kind", "signal_id"],
        sqlite_where=sa.text("status = 'firing'"),
        postgresql_where=sa.text("status = 'firing'"),
    )
    kinds = op.create_table(
        "alert_kinds",
        sa.Column("kind", sa.String(800), primary_key=True),
        sa.Column("node", sa.String(253), nullable=True),
        sa.Column("firing", sa.Integer, nullable=False),
        sa.Column("newest", sa.Integer, nullable=False),
    )
    op.create_index("ix_alert_kinds_node", "alert_kinds", ["node"])
    assert state is not None and kinds is not None
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
    latest = sa.select(sa.func.max(signals.c.id)).group_by(signals.c.fingerprint)
    ids = sorted(int(i) for i in bind.scalars(latest))
    firing: Counter[str] = Counter()
    newest: dict[str, int] = {}
    node_of: dict[str, str | None] = {}
    for start in range(0, len(ids), _BATCH):
        rows = bind.execute(
            sa.select(
                signals.c.id,
                signals.c.fingerprint,
                signals.c.status,
                signals.c.node,
                signals.c.name,
                signals.c.payload,
            ).where(signals.c.id.in_(ids[start : start + _BATCH]))
        )
        values: list[dict[str, Any]] = []
        for row in rows:
            payload = row.payload if isinstance(row.payload, dict) else {}
            xid = (payload.get("labels") or {}).get("xid")
            kind = _kind(row.node, row.name, payload.get("gpu"), xid)
            values.append(
                {
                    "fingerprint": row.fingerprint,
                    "signal_id": row.id,
                    "status": row.status,
                    "kind": kind,
                }
            )
            if row.status == "firing":
                firing[kind] += 1
                newest[kind] = max(newest.get(kind, 0), row.id)
                node_of[kind] = row.node
        if values:
            bind.execute(sa.insert(state), values)
    counted = [
        {"kind": kind, "node": node_of[kind], "firing": n, "newest": newest[kind]}
        for kind, n in firing.items()
    ]
    for start in range(0, len(counted), _BATCH):
        bind.execute(sa.insert(kinds), counted[start : start + _BATCH])


def downgrade() -> None:
    op.drop_index("ix_alert_kinds_node", table_name="alert_kinds")
    op.drop_table("alert_kinds")
    op.drop_index("firing_alerts_by_kind", table_name="alert_state")
    op.drop_table("alert_state")
