"""What came in: webhook deliveries kept as received, and the signals split from them.

Why a part of its own: this is the store's hot path. The webhook answers 200 only after its
delivery is committed, and under a burst the inbox splits many deliveries at once, so these
writes take SQLite's write turn (`Database.write_tx`) and are shaped for it: one cached
statement run as executemany, parsing done outside the transaction.

What it must never do: lose or double an accepted alert (a delivery is split exactly once, a
signal kept once by its dedup key, also with replicas at it together), let one delivery hold
up the others (one that cannot be split is quarantined: kept, passed over), hold the write
turn while bodies are parsed, or judge what a signal means (that is the diagnosis').
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Row
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError

from bot.errors import StoreUnavailable
from bot.model import Signal
from bot.ports import FiringKind, QuarantinedDelivery, SignalStore, SplitDeliveries
from bot.store.database import Part, insert_once
from bot.store.tables import alert_kinds, alert_state, deliveries, signals

MAX_REASON = 500

PER_NODE = 64
"""Kinds of alert (name, GPU, Xid) a diagnosis sees per node: more is one alert storm, and
each kind costs the rules a look."""
MAX_GROUPS = 20000
"""Kinds of alert a diagnosis sees in all (a thousand nodes with a storm each)."""
SPLIT_BYTES = 2 * 1024 * 1024
"""Webhook bodies split in one go: their parsed signals (about ten times the bytes) are what
a split holds in memory, so a backlog is taken a few megabytes at a time, never at once."""
_IN_CHUNK = 500
"""Ids per `IN (...)`: under SQLite's oldest bound-parameter limit (999)."""

log = logging.getLogger("gpubot.store")


def signal_key(signal: Signal) -> str:
    """The dedup key: a retried or repeated delivery of the same alert is one signal."""
    started = signal.starts_at.isoformat() if signal.starts_at else ""
    return f"{signal.fingerprint}|{signal.status}|{started}"[:300]


class SqlSignals(Part, SignalStore):
    """The `deliveries` and `signals` tables.

    Owns: keeping a webhook body whole before its 200, splitting stored bodies into signals
    exactly once (only the transaction that deletes a delivery stores its signals), where each
    alert stands now (`alert_state`, moved in the same transaction), and the firing alerts a
    diagnosis reads, counted per kind. Never: parses a body inside a transaction, or holds
    SQLite's write turn for longer than the INSERT or DELETE itself.
    """

    def add_signals(self, new: Sequence[Signal], received_at: datetime) -> list[bool]:
        if not new:
            return []
        with self.db.write_tx() as tx:
            return _add_signals(tx, [(signal, received_at) for signal in new])

    def add_delivery(self, source: str, body: bytes, received_at: datetime) -> int:
        [delivery_id] = self.add_deliveries([(source, body, received_at)])
        return delivery_id

    def add_deliveries(self, new: Sequence[tuple[str, bytes, datetime]]) -> list[int]:
        if not new:
            return []
        with self.db.write_tx() as tx:
            inserted = tx.scalars(
                deliveries.insert().returning(deliveries.c.id, sort_by_parameter_order=True),
                [{"source": s, "body": b, "received_at": at} for s, b, at in new],
            )
            return [int(i) for i in inserted]

    def split_deliveries(
        self,
        split: Callable[[str, bytes], Sequence[Signal]],
        limit: int = 200,
        max_bytes: int = SPLIT_BYTES,
    ) -> SplitDeliveries:
        """Takes up to `limit` stored deliveries, oldest first, and at most `max_bytes` of
        their bodies (but always the oldest one), and stores their signals: a delivery is
        split exactly once, also with replicas at it together. One that cannot be split is
        quarantined (kept, with when and why, and passed over from then on): `split` raised
        for it (an older gpubot accepted a body this one refuses, or a bug), or the database
        refused its signals. A store that is down (`StoreUnavailable`) quarantines nothing:
        the same deliveries are taken again next time."""
        # Read and split outside the write transaction: SQLite has one writer, and the
        # webhook's next insert must not wait while bodies are parsed.
        with self.db.tx() as tx:
            sizes = tx.execute(
                sa.select(deliveries.c.id, sa.func.length(deliveries.c.body).label("size"))
                .where(deliveries.c.quarantined_at.is_(None))
                .order_by(deliveries.c.id)
                .limit(limit)
            )
            ids = _within(((row.id, row.size or 0) for row in sizes), max_bytes)
            rows = list(
                tx.execute(
                    sa.select(
                        deliveries.c.id,
                        deliveries.c.source,
                        deliveries.c.received_at,
                        deliveries.c.body,
                    )
                    .where(deliveries.c.id.in_(ids))
                    .order_by(deliveries.c.id)
                )
            )
        if not rows:
            return SplitDeliveries(deliveries=0, signals=[], duplicates=0, dropped=0)
        split_up: dict[int, list[tuple[Signal, datetime]]] = {}
        refused: dict[int, str] = {}
        for row in rows:
            received_at: datetime = row.received_at
            try:
                split_up[row.id] = [
                    (signal, received_at) for signal in split(str(row.source), bytes(row.body))
                ]
            except Exception as exc:  # whatever it is, it must not hold up the others
                refused[row.id] = _why(exc)
        try:
            stored = self._store_split(rows, split_up)
        except StoreUnavailable:
            raise
        except Exception:
            # The database refused a signal (a value it cannot hold): find whose, one
            # delivery per transaction, and set that one aside.
            stored = _Stored()
            for row in rows:
                if row.id not in split_up:
                    continue
                try:
                    stored += self._store_split([row], split_up)
                except StoreUnavailable:
                    raise
                except Exception as exc:
                    refused[row.id] = _why(exc)
        quarantined = self._quarantine(refused) if refused else []
        return SplitDeliveries(
            deliveries=len(rows),
            signals=stored.new,
            duplicates=stored.duplicates,
            dropped=len(quarantined),
            quarantined=quarantined,
        )

    def _store_split(
        self, rows: Sequence[Row[Any]], split_up: dict[int, list[tuple[Signal, datetime]]]
    ) -> _Stored:
        """In one transaction: deletes `rows` that were split and stores their signals."""
        ids = [row.id for row in rows if row.id in split_up]
        if not ids:
            return _Stored()
        with self.db.write_tx() as tx:
            # Only the transaction that deletes a delivery stores its signals: a replica
            # splitting the same rows at the same time finds them gone and stores nothing.
            mine: set[int] = set(
                tx.scalars(
                    sa.delete(deliveries)
                    .where(deliveries.c.id.in_(ids) & deliveries.c.quarantined_at.is_(None))
                    .returning(deliveries.c.id)
                )
            )
            found = [pair for id_ in ids if id_ in mine for pair in split_up[id_]]
            fresh = _add_signals(tx, found) if found else []
        return _Stored(
            new=[signal for (signal, _), is_new in zip(found, fresh, strict=True) if is_new],
            duplicates=len(found) - sum(fresh),
        )

    def _quarantine(self, refused: dict[int, str]) -> list[tuple[int, str]]:
        """Sets `refused` deliveries aside: (id, why) of those this call set aside (a
        replica may have split or quarantined one first)."""
        now = datetime.now(UTC)
        quarantined: list[tuple[int, str]] = []
        with self.db.write_tx() as tx:
            for delivery_id, why in refused.items():
                done = tx.scalar(
                    sa.update(deliveries)
                    .where((deliveries.c.id == delivery_id) & deliveries.c.quarantined_at.is_(None))
                    .values(quarantined_at=now, quarantine_reason=why)
                    .returning(deliveries.c.id)
                )
                if done is not None:
                    quarantined.append((delivery_id, why))
        return quarantined

    def quarantined_deliveries(self, limit: int = 100) -> list[QuarantinedDelivery]:
        query = (
            sa.select(
                deliveries.c.id,
                deliveries.c.source,
                deliveries.c.received_at,
                deliveries.c.quarantined_at,
                deliveries.c.quarantine_reason,
            )
            .where(deliveries.c.quarantined_at.is_not(None))
            .order_by(deliveries.c.id)
            .limit(limit)
        )
        with self.db.tx() as tx:
            return [
                QuarantinedDelivery(
                    id=row.id,
                    source=row.source,
                    received_at=row.received_at,
                    quarantined_at=row.quarantined_at,
                    reason=row.quarantine_reason or "",
                )
                for row in tx.execute(query)
            ]

    def deliveries_waiting(self) -> int:
        query = (
            sa.select(sa.func.count())
            .select_from(deliveries)
            .where(deliveries.c.quarantined_at.is_(None))
        )
        with self.db.tx() as tx:
            return int(tx.scalar(query) or 0)

    def signals(self, node: str | None = None, limit: int = 1000) -> list[Signal]:
        query = sa.select(signals.c.payload).order_by(signals.c.id).limit(limit)
        if node is not None:
            query = query.where(signals.c.node == node)
        with self.db.tx() as tx:
            payloads: list[Any] = list(tx.scalars(query))
        return [Signal.model_validate(p) for p in payloads]

    def firing_kinds(
        self, node: str | None = None, per_node: int = PER_NODE, limit: int = MAX_GROUPS
    ) -> list[FiringKind]:
        """How many alerts of each kind (node, name, GPU, Xid) fire, and the newest of each,
        oldest first: one row per kind, however many alerts. At most `per_node` kinds per
        node and `limit` in all, the newest kept past either (a new Xid must not wait for
        thousands of old warnings to resolve), the cut logged."""
        query = sa.select(alert_kinds.c.node, alert_kinds.c.firing, alert_kinds.c.newest).where(
            alert_kinds.c.firing > 0
        )
        if node is not None:
            query = query.where(alert_kinds.c.node == node)
        with self.db.tx() as tx:
            found = [FiringKind(row.node, row.firing, row.newest) for row in tx.execute(query)]
        return sorted(_bounded(found, per_node, limit), key=lambda kind: kind.newest)

    def signals_by_id(self, ids: Collection[int]) -> dict[int, Signal]:
        ordered = sorted(ids)
        found: dict[int, Signal] = {}
        with self.db.tx() as tx:
            for start in range(0, len(ordered), _IN_CHUNK):
                chunk = ordered[start : start + _IN_CHUNK]
                query = sa.select(signals.c.id, signals.c.payload).where(signals.c.id.in_(chunk))
                for row in tx.execute(query):
                    found[row.id] = Signal.model_validate(row.payload)
        return found

    def firing_alerts(
        self, node: str | None = None, per_node: int = PER_NODE, limit: int = MAX_GROUPS
    ) -> list[Signal]:
        """`firing_kinds` as signals: the newest of each kind, its `count` how many fire."""
        kinds = self.firing_kinds(node, per_node, limit)
        newest = self.signals_by_id([kind.newest for kind in kinds])
        return [
            newest[kind.newest].model_copy(update={"count": kind.firing})
            for kind in kinds
            if kind.newest in newest
        ]

    def ping(self) -> None:
        """Raises `StoreUnavailable` when the database does not answer, saying why in words
        that name no URL, host, user or database: `/readyz` shows them to anyone."""
        try:
            with self.db.tx() as tx:
                tx.execute(sa.text("SELECT 1"))
        except StoreUnavailable as exc:
            raise StoreUnavailable(public_reason(exc)) from exc

    def count_signals(self) -> int:
        with self.db.tx() as tx:
            return int(tx.scalar(sa.select(sa.func.count()).select_from(signals)) or 0)


def _add_signals(tx: Connection, new: Sequence[tuple[Signal, datetime]]) -> list[bool]:
    """Which of `new` were not stored before (the first of equal ones in `new` counts); the
    alerts' state moves to the newest of those stored."""
    keys = [signal_key(signal) for signal, _ in new]
    rows = [
        {
            "dedup_key": key,
            "fingerprint": signal.fingerprint,
            "source": signal.source,
            "name": signal.name,
            "status": signal.status,
            "node": signal.node,
            "received_at": received_at,
            "truncated_alerts": signal.truncated_alerts,
            "payload": signal.model_dump(mode="json", exclude={"count"}),
        }
        for (signal, received_at), key in zip(new, keys, strict=True)
    ]
    # Two replicas can take the same alert at once, and a batch can repeat one: the unique
    # key skips the second instead of failing the whole batch with an IntegrityError. One
    # statement run as executemany: SQLAlchemy batches it into multi-row INSERTs with
    # RETURNING itself, without compiling a statement per webhook.
    insert = insert_once(signals, signals.c.dedup_key, tx.dialect).returning(signals.c.id)
    stored: dict[str, int] = {row.dedup_key: row.id for row in tx.execute(insert, rows)}
    fresh = []
    latest: dict[str, tuple[Signal, int]] = {}
    for (signal, _), key in zip(new, keys, strict=True):
        id_ = stored.pop(key, None)
        fresh.append(id_ is not None)
        if id_ is not None:
            latest[signal.fingerprint] = (signal, id_)
    if latest:
        _move_state(tx, latest.values())
    return fresh


def kind_of(signal: Signal) -> str:
    """The kind an alert is counted under: its node, name, GPU and Xid (a missing one is not
    an empty one), as one key that fits `alert_kinds.kind`."""
    xid = signal.labels.get("xid")
    parts = (signal.node, signal.name, signal.gpu[:200] if signal.gpu else signal.gpu, xid)
    return _KIND_SEPARATOR.join("!" if part is None else f"={part}" for part in parts)[:800]


_KIND_SEPARATOR = "\x1f"
_STATE_LOCK = 0x67707563  # "gpuc": replicas move alert states one at a time on PostgreSQL


def _move_state(tx: Connection, latest: Iterable[tuple[Signal, int]]) -> None:
    """Each alert's state to its newest signal, unless a later one is there already (the
    highest id is the last word), and the counts of the kinds it leaves and joins with it."""
    if tx.dialect.name == "postgresql":
        # Two replicas storing signals of one alert at once would each count from the same
        # state: counts stay exact only if state moves take turns (SQLite's writes do anyway).
        tx.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _STATE_LOCK})
    moving = list(latest)
    before: dict[str, Row[Any]] = {}
    fingerprints = [signal.fingerprint for signal, _ in moving]
    for start in range(0, len(fingerprints), _IN_CHUNK):
        query = sa.select(
            alert_state.c.fingerprint,
            alert_state.c.signal_id,
            alert_state.c.status,
            alert_state.c.kind,
        ).where(alert_state.c.fingerprint.in_(fingerprints[start : start + _IN_CHUNK]))
        before.update((row.fingerprint, row) for row in tx.execute(query))
    changes: dict[str, _KindChange] = {}
    states = []
    for signal, id_ in moving:
        old = before.get(signal.fingerprint)
        if old is not None and old.signal_id > id_:
            continue
        kind = kind_of(signal)
        if old is not None and old.status == "firing":
            changes.setdefault(old.kind, _KindChange()).leave()
        if signal.status == "firing":
            changes.setdefault(kind, _KindChange()).join(signal.node, id_)
        states.append(
            {
                "fingerprint": signal.fingerprint,
                "signal_id": id_,
                "status": signal.status,
                "kind": kind,
            }
        )
    if not states:
        return
    insert = postgresql.insert if tx.dialect.name == "postgresql" else sqlite.insert
    state = insert(alert_state)
    tx.execute(
        state.on_conflict_do_update(
            index_elements=[alert_state.c.fingerprint],
            set_={c: state.excluded[c] for c in ("signal_id", "status", "kind")},
        ),
        states,
    )
    if not changes:
        return  # resolves of alerts never seen firing
    counted = insert(alert_kinds)
    tx.execute(
        counted.on_conflict_do_update(
            index_elements=[alert_kinds.c.kind],
            set_={
                "firing": alert_kinds.c.firing + counted.excluded.firing,
                "newest": sa.case(
                    (counted.excluded.newest > alert_kinds.c.newest, counted.excluded.newest),
                    else_=alert_kinds.c.newest,
                ),
            },
        ),
        [
            {"kind": kind, "node": change.node, "firing": change.delta, "newest": change.newest}
            for kind, change in changes.items()
        ],
    )
    left = [kind for kind, change in changes.items() if change.left]
    for start in range(0, len(left), _IN_CHUNK):
        chunk = left[start : start + _IN_CHUNK]
        gone = alert_kinds.c.kind.in_(chunk) & (alert_kinds.c.firing <= 0)
        tx.execute(sa.delete(alert_kinds).where(gone))
        # The newest of a kind may be one that just stopped: the newest of those still firing.
        still = (
            sa.select(sa.func.max(alert_state.c.signal_id))
            .where((alert_state.c.kind == alert_kinds.c.kind) & (alert_state.c.status == "firing"))
            .scalar_subquery()
        )
        tx.execute(sa.update(alert_kinds).where(alert_kinds.c.kind.in_(chunk)).values(newest=still))


class _KindChange:
    """What one write does to a kind: alerts joining and leaving it."""

    def __init__(self) -> None:
        self.delta = 0
        self.left = False
        self.node: str | None = None
        self.newest = 0

    def join(self, node: str | None, id_: int) -> None:
        self.delta += 1
        self.node = node
        self.newest = max(self.newest, id_)

    def leave(self) -> None:
        self.delta -= 1
        self.left = True


def _bounded(kinds: list[FiringKind], per_node: int, limit: int) -> list[FiringKind]:
    """At most `per_node` kinds per node and `limit` in all: the newest kept. A cut is
    logged, with how many alerts it left out."""
    by_node: dict[str | None, list[FiringKind]] = {}
    for kind in kinds:
        by_node.setdefault(kind.node, []).append(kind)
    kept: list[FiringKind] = []
    for node, found in by_node.items():
        if len(found) > per_node:
            found.sort(key=lambda kind: kind.newest, reverse=True)
            log.warning(
                "node %s has %d kinds of alert firing (%d alerts): the %d newest kinds are "
                "diagnosed, %d alerts left out",
                node,
                len(found),
                sum(kind.firing for kind in found),
                per_node,
                sum(kind.firing for kind in found[per_node:]),
            )
            found = found[:per_node]
        kept += found
    if len(kept) > limit:
        kept.sort(key=lambda kind: kind.newest, reverse=True)
        log.warning(
            "%d kinds of alert are firing: the oldest beyond %d are left out of diagnosis "
            "(%d alerts)",
            len(kept),
            limit,
            sum(kind.firing for kind in kept[limit:]),
        )
        kept = kept[:limit]
    return kept


def _within(sizes: Iterable[tuple[int, int]], max_bytes: int) -> list[int]:
    """The ids of (id, body size) pairs, in order, while their bodies fit in `max_bytes`:
    always the first, so a body larger than the budget is still split, on its own."""
    ids: list[int] = []
    total = 0
    for id_, size in sizes:
        total += size
        if ids and total > max_bytes:
            break
        ids.append(id_)
    return ids


class _Stored:
    """Signals a split stored: the new ones, in delivery order, and how many were known."""

    def __init__(self, new: list[Signal] | None = None, duplicates: int = 0) -> None:
        self.new = new or []
        self.duplicates = duplicates

    def __iadd__(self, other: _Stored) -> _Stored:
        self.new += other.new
        self.duplicates += other.duplicates
        return self


def _why(exc: BaseException) -> str:
    """Why a delivery was quarantined, as text any database and log can hold: a message may
    quote the delivery itself (a lone surrogate, a NUL), so everything but printable ASCII
    is escaped, and it is cut to the column."""
    text = f"{type(exc).__name__}: {exc}"
    escaped = text.encode("ascii", "backslashreplace").decode("ascii")
    printable = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in escaped)
    return printable if len(printable) <= MAX_REASON else printable[: MAX_REASON - 1] + "…"


def public_reason(exc: StoreUnavailable) -> str:
    """Why the database does not answer, in words that name no URL, host, user or database
    (SQLite's messages name none; PostgreSQL's name them all, so they are classified)."""
    cause = exc.__cause__
    orig = cause.orig if isinstance(cause, DBAPIError) else None
    if orig is None:
        return "no answer"
    module = type(orig).__module__
    if module.startswith("sqlite3"):
        return str(orig).splitlines()[0][:200] if str(orig) else type(orig).__name__
    sqlstate = getattr(orig, "sqlstate", None)
    text = str(orig).lower()
    if isinstance(sqlstate, str) and sqlstate:
        for prefix, words in _SQLSTATES:
            if sqlstate.startswith(prefix):
                return words
        return f"database error (SQLSTATE {sqlstate})"
    for needle, words in _CONNECT_FAILURES:
        if needle in text:
            return words
    return "cannot connect"


_SQLSTATES = (
    ("28", "authentication failed"),
    ("3D", "no such database"),
    ("55P03", "lock not available"),
    ("57014", "query timed out"),
    ("57P", "the server is shutting down or starting"),
    ("53", "the server is out of resources"),
    ("08", "connection failed"),
    ("40", "transaction rolled back (serialization or deadlock)"),
)
_CONNECT_FAILURES = (
    ("timeout", "connection timed out"),
    ("timed out", "connection timed out"),
    ("refused", "connection refused"),
    ("authentication failed", "authentication failed"),
    ("does not exist", "no such database or user"),
    ("could not translate host name", "host name does not resolve"),
    ("name or service not known", "host name does not resolve"),
    ("closed the connection", "connection lost"),
    ("ssl", "TLS error"),
)
