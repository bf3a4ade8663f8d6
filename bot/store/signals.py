"""What came in: webhook deliveries kept as received, and the signals split from them.

Why a part of its own: this is the store's hot path. The webhook answers 200 only after its
delivery is committed, and under a burst the inbox splits many deliveries at once, so these
writes take SQLite's write turn (`Database.write_tx`) and are shaped for it: one cached
statement run as executemany, parsing done outside the transaction.

What it must never do: lose or double an accepted alert (a delivery is split exactly once, a
signal kept once by its dedup key, also with replicas at it together), hold the write turn
while bodies are parsed, or judge what a signal means (that is the diagnosis').
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from bot.errors import InputError
from bot.model import Signal
from bot.ports import SignalStore, SplitDeliveries
from bot.store.database import Part, insert_once
from bot.store.tables import deliveries, signals

log = logging.getLogger("gpubot.store")


def signal_key(signal: Signal) -> str:
    """The dedup key: a retried or repeated delivery of the same alert is one signal."""
    started = signal.starts_at.isoformat() if signal.starts_at else ""
    return f"{signal.fingerprint}|{signal.status}|{started}"[:300]


class SqlSignals(Part, SignalStore):
    """The `deliveries` and `signals` tables.

    Owns: keeping a webhook body whole before its 200, splitting stored bodies into signals
    exactly once (only the transaction that deletes a delivery stores its signals), and the
    firing signals a diagnosis reads. Never: parses a body inside a transaction, or holds
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
        self, split: Callable[[str, bytes], Sequence[Signal]], limit: int = 200
    ) -> SplitDeliveries:
        """Takes up to `limit` stored deliveries, oldest first, and stores their signals: a
        delivery is split exactly once, also with replicas at it together. `split` turns a
        body into signals; one that raises `InputError` is dropped (it passed validation when
        it was accepted, so only a change of gpubot can do that) and counted."""
        # Read and split outside the write transaction: SQLite has one writer, and the
        # webhook's next insert must not wait while bodies are parsed.
        with self.db.tx() as tx:
            rows = list(
                tx.execute(
                    sa.select(
                        deliveries.c.id,
                        deliveries.c.source,
                        deliveries.c.received_at,
                        deliveries.c.body,
                    )
                    .order_by(deliveries.c.id)
                    .limit(limit)
                )
            )
        split_up: dict[int, list[tuple[Signal, datetime]]] = {}
        dropped: set[int] = set()
        for row in rows:
            received_at: datetime = row.received_at
            try:
                split_up[row.id] = [
                    (signal, received_at) for signal in split(str(row.source), bytes(row.body))
                ]
            except InputError:
                dropped.add(row.id)
                log.exception("delivery %s (%s) cannot be split: dropped", row.id, row.source)
        if not rows:
            return SplitDeliveries(deliveries=0, signals=[], duplicates=0, dropped=0)
        with self.db.write_tx() as tx:
            # Only the transaction that deletes a delivery stores its signals: a replica
            # splitting the same rows at the same time finds them gone and stores nothing.
            mine: set[int] = set(
                tx.scalars(
                    sa.delete(deliveries)
                    .where(deliveries.c.id.in_([row.id for row in rows]))
                    .returning(deliveries.c.id)
                )
            )
            found = [pair for id_, pairs in split_up.items() if id_ in mine for pair in pairs]
            fresh = _add_signals(tx, found) if found else []
        return SplitDeliveries(
            deliveries=len(rows),
            signals=[signal for (signal, _), is_new in zip(found, fresh, strict=True) if is_new],
            duplicates=len(found) - sum(fresh),
            dropped=len(dropped & mine),
        )

    def deliveries_waiting(self) -> int:
        with self.db.tx() as tx:
            return int(tx.scalar(sa.select(sa.func.count()).select_from(deliveries)) or 0)

    def signals(self, node: str | None = None, limit: int = 1000) -> list[Signal]:
        query = sa.select(signals.c.payload).order_by(signals.c.id).limit(limit)
        if node is not None:
            query = query.where(signals.c.node == node)
        with self.db.tx() as tx:
            payloads: list[Any] = list(tx.scalars(query))
        return [Signal.model_validate(p) for p in payloads]

    def active_signals(self, limit: int = 20000) -> list[Signal]:
        """Firing signals with no resolved delivery after them: what is still going on, in
        the order they came. Past `limit`, the newest are kept (a new Xid must not wait for
        thousands of old warnings to resolve) and the cut is logged."""
        later = signals.alias("later")
        resolved_since = (
            sa.select(later.c.id)
            .where(
                (later.c.fingerprint == signals.c.fingerprint)
                & (later.c.status == "resolved")
                & (later.c.id > signals.c.id)
            )
            .exists()
        )
        query = (
            sa.select(signals.c.payload)
            .where((signals.c.status == "firing") & ~resolved_since)
            .order_by(signals.c.id.desc())
            .limit(limit)
        )
        with self.db.tx() as tx:
            payloads: list[Any] = list(tx.scalars(query))
        if len(payloads) == limit:
            log.warning(
                "%d or more alerts are firing: the oldest beyond %d are left out of diagnosis",
                limit,
                limit,
            )
        return [Signal.model_validate(p) for p in reversed(payloads)]

    def ping(self) -> None:
        """Raises `StoreUnavailable` when the database does not answer."""
        with self.db.tx() as tx:
            tx.execute(sa.text("SELECT 1"))

    def count_signals(self) -> int:
        with self.db.tx() as tx:
            return int(tx.scalar(sa.select(sa.func.count()).select_from(signals)) or 0)


def _add_signals(tx: Connection, new: Sequence[tuple[Signal, datetime]]) -> list[bool]:
    """Which of `new` were not stored before (the first of equal ones in `new` counts)."""
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
            "payload": signal.model_dump(mode="json"),
        }
        for (signal, received_at), key in zip(new, keys, strict=True)
    ]
    # Two replicas can take the same alert at once, and a batch can repeat one: the unique
    # key skips the second instead of failing the whole batch with an IntegrityError. One
    # statement run as executemany: SQLAlchemy batches it into multi-row INSERTs with
    # RETURNING itself, without compiling a statement per webhook.
    stored = set(tx.scalars(insert_once(signals, signals.c.dedup_key, tx.dialect), rows))
    fresh = []
    for key in keys:
        fresh.append(key in stored)
        stored.discard(key)
    return fresh
