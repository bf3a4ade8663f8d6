"""The schema, as SQLAlchemy Core tables. Alembic's migrations (`migrations/versions`) are
what create and change it in a database; `tests/contract/test_store.py` proves the two agree."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect


class UtcDateTime(sa.types.TypeDecorator[datetime]):
    """Aware UTC datetimes in and out: SQLite keeps no zone, so a naive value read back is
    UTC by construction, and a naive value written is a bug caught here."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: gpubot stores UTC times only")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = sa.MetaData()

signals = sa.Table(
    "signals",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    # fingerprint|status|startsAt: a retried or repeated delivery has the same key.
    sa.Column("dedup_key", sa.String(300), nullable=False, unique=True),
    sa.Column("fingerprint", sa.String(200), nullable=False, index=True),
    sa.Column("source", sa.String(20), nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("status", sa.String(10), nullable=False),
    sa.Column("node", sa.String(253), nullable=True, index=True),
    sa.Column("received_at", UtcDateTime, nullable=False),
    sa.Column("truncated_alerts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("payload", sa.JSON, nullable=False),
)

# Where each alert (by fingerprint) stands now: the latest signal stored for it, whether that
# one fires, and its kind (node, name, GPU and Xid, `bot.store.signals.kind_of`). Written with
# the signals, in their transaction (migration 0007). A row is replaced only by a later signal
# (a higher id): the last word is the last signal stored, whatever order replicas commit in.
alert_state = sa.Table(
    "alert_state",
    metadata,
    sa.Column("fingerprint", sa.String(200), primary_key=True),
    sa.Column("signal_id", sa.Integer, sa.ForeignKey("signals.id"), nullable=False),
    sa.Column("status", sa.String(10), nullable=False),
    sa.Column("kind", sa.String(800), nullable=False),
)
# The newest firing alert of a kind, when the one counted as newest resolves.
sa.Index(
    "firing_alerts_by_kind",
    alert_state.c.kind,
    alert_state.c.signal_id,
    sqlite_where=alert_state.c.status == "firing",
    postgresql_where=alert_state.c.status == "firing",
)

# How many alerts of each kind fire, and the newest of them: what a diagnosis reads (issue 15),
# one row per kind, so a pass never loads every firing signal. Kept in step with
# `alert_state` in the same transaction; a kind none fires any more is deleted.
alert_kinds = sa.Table(
    "alert_kinds",
    metadata,
    sa.Column("kind", sa.String(800), primary_key=True),
    sa.Column("node", sa.String(253), nullable=True, index=True),
    sa.Column("firing", sa.Integer, nullable=False),
    sa.Column("newest", sa.Integer, nullable=False),
)

# The webhook's inbox: a body is stored as received (one row, before the 200) and split into
# `signals` by the pipeline, which deletes the row in the same transaction. A row left here by
# a crash is split at the next start. One that cannot be split is quarantined: kept, with
# when and why (migration 0006), and passed over by every later split.
deliveries = sa.Table(
    "deliveries",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("source", sa.String(20), nullable=False),
    sa.Column("received_at", UtcDateTime, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.Column("quarantined_at", UtcDateTime, nullable=True),
    sa.Column("quarantine_reason", sa.String(500), nullable=True),
)

incidents = sa.Table(
    "incidents",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("cluster", sa.String(100), nullable=False),
    # The node, or "pool:NAME" / "cluster" for wider incidents: never NULL, so the unique
    # index below also holds for them.
    sa.Column("subject", sa.String(300), nullable=False),
    sa.Column("node", sa.String(253), nullable=True, index=True),
    sa.Column("pool", sa.String(253), nullable=True),
    sa.Column("rule", sa.String(100), nullable=False),
    sa.Column("state", sa.String(30), nullable=False),
    sa.Column("severity", sa.String(20), nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("opened_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Column("resolved_at", UtcDateTime, nullable=True),
    sa.Column("reopened", sa.Integer, nullable=False, server_default="0"),
    sa.Column("parent", sa.Integer, sa.ForeignKey("incidents.id"), nullable=True),
    sa.Column("chat_ref", sa.String(200), nullable=True),
    sa.Column("diagnosis", sa.JSON, nullable=True),
    sa.Column("signals", sa.JSON, nullable=False),
    # Until when its proposals are held: a better-informed diagnosis is likely to follow.
    sa.Column("held_until", UtcDateTime, nullable=True),
    # Since when its symptom has not been seen: it resolves once that is long enough.
    sa.Column("absent_since", UtcDateTime, nullable=True),
)
# Two replicas diagnosing the same alert must land on one incident, not two.
sa.Index(
    "one_unresolved_incident_per_subject",
    incidents.c.cluster,
    incidents.c.subject,
    incidents.c.rule,
    unique=True,
    sqlite_where=incidents.c.state != "resolved",
    postgresql_where=incidents.c.state != "resolved",
)

timeline = sa.Table(
    "timeline",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("incident_id", sa.Integer, sa.ForeignKey("incidents.id"), nullable=False, index=True),
    sa.Column("at", UtcDateTime, nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("kind", sa.String(30), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
)

requests = sa.Table(
    "action_requests",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("incident_id", sa.Integer, sa.ForeignKey("incidents.id"), nullable=True, index=True),
    sa.Column("node", sa.String(253), nullable=False),
    sa.Column("action", sa.String(20), nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False),
    sa.Column("payload", sa.JSON, nullable=False),
)

votes = sa.Table(
    "approvals",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("request_id", sa.String(64), sa.ForeignKey("action_requests.id"), nullable=False),
    sa.Column("approver", sa.String(200), nullable=False),
    sa.Column("at", UtcDateTime, nullable=False),
    sa.UniqueConstraint("request_id", "approver", name="one_vote_per_person"),
)

# Each signed chat request taken, by a digest of its Slack signature (which covers its
# timestamp and body), with the timestamp it was signed at (migration 0008). A copy sent again,
# to this replica, another or this one restarted, meets the primary key: the first INSERT
# wins, as a vote's. Rows are kept only for Slack's replay window: past it, Slack's
# verification refuses the timestamp before anything asks here, so noting a new request
# deletes them.
signed_requests = sa.Table(
    "signed_requests",
    metadata,
    sa.Column("digest", sa.String(64), primary_key=True),
    sa.Column("sent_at", UtcDateTime, nullable=False, index=True),
)

executions = sa.Table(
    "executions",
    metadata,
    # The primary key is the request: invariant 3 (an approval acts at most once) is this
    # constraint, not a flag in memory.
    sa.Column("request_id", sa.String(64), sa.ForeignKey("action_requests.id"), primary_key=True),
    sa.Column("executor", sa.String(200), nullable=False),
    sa.Column("started_at", UtcDateTime, nullable=False),
    # The owner proves it is alive by moving this; another process may take over only an
    # execution whose heartbeat went stale (a conditional UPDATE, so only one can).
    sa.Column("heartbeat_at", UtcDateTime, nullable=True),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    sa.Column("outcome", sa.String(20), nullable=False),
    sa.Column("detail", sa.Text, nullable=False, server_default=""),
)

outbox = sa.Table(
    "chat_outbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    # The sender's idempotency key: putting the same message twice keeps one.
    sa.Column("key", sa.String(300), nullable=False, unique=True),
    # Messages of one group go out one at a time, in id order: a message, its updates and
    # its thread replies never overtake each other.
    sa.Column("group_key", sa.String(300), nullable=False, index=True),
    sa.Column("method", sa.String(50), nullable=False),
    sa.Column("payload", sa.JSON, nullable=False),
    # The key of the message this one updates or replies to: its ts comes from there.
    sa.Column("refers_to", sa.String(300), nullable=True),
    sa.Column("status", sa.String(10), nullable=False, index=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_at", UtcDateTime, nullable=False),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("result", sa.JSON, nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("sent_at", UtcDateTime, nullable=True),
)
