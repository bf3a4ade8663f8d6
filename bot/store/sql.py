"""`SqlStore`: the Store port on SQLAlchemy Core. One method, one transaction.

Exactly-once lives in constraints, not in memory: a signal's dedup key, one unresolved
incident per (cluster, subject, rule), one vote per person and request, one execution per
request. A caller that loses a race sees the constraint, never a duplicate.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from bot.errors import InputError, NotFound, StateChanged, StoreUnavailable
from bot.incidents.lifecycle import check, withdrawal
from bot.model import (
    ActionRequest,
    Diagnosis,
    Incident,
    IncidentState,
    OutboxItem,
    Signal,
    TimelineEntry,
    TimelineKind,
    Vote,
)
from bot.names import GPUBOT
from bot.ports import ExecutionOutcome, SplitDeliveries
from bot.store import schema
from bot.store.tables import (
    deliveries,
    executions,
    incidents,
    outbox,
    requests,
    signals,
    timeline,
    votes,
)

log = logging.getLogger("gpubot.store")


@dataclass(frozen=True)
class ExecutionRecord:
    request_id: str
    executor: str
    started_at: datetime
    finished_at: datetime | None
    outcome: ExecutionOutcome
    detail: str
    heartbeat_at: datetime | None = None


def signal_key(signal: Signal) -> str:
    started = signal.starts_at.isoformat() if signal.starts_at else ""
    return f"{signal.fingerprint}|{signal.status}|{started}"[:300]


def subject_of(diagnosis: Diagnosis) -> str:
    if diagnosis.node:
        return diagnosis.node
    return f"pool:{diagnosis.pool}" if diagnosis.pool else "cluster"


def _create_engine(url: str, lock_timeout_s: float) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = sa.create_engine(url, connect_args={"timeout": lock_timeout_s})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            # WAL: webhook writes do not block readers (the CLI, the timeline).
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    if parsed.get_backend_name() == "postgresql" and parsed.drivername == "postgresql":
        # psycopg 3 is the driver we ship; a bare postgresql:// would ask for psycopg2.
        parsed = parsed.set(drivername="postgresql+psycopg")
    return sa.create_engine(
        parsed,
        pool_pre_ping=True,
        connect_args={"connect_timeout": max(1, int(lock_timeout_s))},
    )


class SqlStore:
    def __init__(self, engine: Engine, url_for_humans: str) -> None:
        self.engine = engine
        self.url = url_for_humans
        # SQLite has one writer, and a connection that finds the lock taken sleeps 1, 2, 5,
        # 10 ms... before it looks again. The webhook's threads take turns here instead, and
        # each goes the moment the one before commits.
        self._write_turn: AbstractContextManager[Any] = (
            threading.Lock() if engine.dialect.name == "sqlite" else nullcontext()
        )

    @classmethod
    def open(cls, url: str, *, lock_timeout_s: float = 5.0, migrate: bool = True) -> SqlStore:
        """Connects and checks the schema (migrating an empty database when `migrate`)."""
        engine = _create_engine(url, lock_timeout_s)
        shown = make_url(url).render_as_string(hide_password=True)
        store = cls(engine, shown)
        if migrate:
            with store._translated():
                schema.ensure_current(engine, shown)
        return store

    def close(self) -> None:
        self.engine.dispose()

    # ---- plumbing -------------------------------------------------------------------------

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """A database that is down, locked or gone mid-query is `StoreUnavailable`; a
        constraint is the caller's to handle; anything else is a bug and propagates."""
        try:
            yield
        except IntegrityError:
            raise
        except DBAPIError as exc:
            if isinstance(exc, OperationalError) or exc.connection_invalidated:
                raise StoreUnavailable(f"store {self.url}: {exc.orig or exc}") from exc
            raise

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        with self._translated(), self.engine.begin() as connection:
            yield connection

    @contextmanager
    def _write_tx(self) -> Iterator[Connection]:
        """A transaction that writes from its first statement, for the hot paths."""
        with self._write_turn, self._tx() as connection:
            yield connection

    # ---- signals --------------------------------------------------------------------------

    def add_signals(self, new: Sequence[Signal], received_at: datetime) -> list[bool]:
        if not new:
            return []
        with self._write_tx() as tx:
            return self._add_signals(tx, [(signal, received_at) for signal in new])

    def _add_signals(self, tx: Connection, new: Sequence[tuple[Signal, datetime]]) -> list[bool]:
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
        # key skips the second instead of failing the whole batch with an IntegrityError.
        stored = set(tx.scalars(self._insert_new_signals(), rows))
        fresh = []
        for key in keys:
            fresh.append(key in stored)
            stored.discard(key)
        return fresh

    # ---- deliveries (the webhook's inbox) -------------------------------------------------

    def add_delivery(self, source: str, body: bytes, received_at: datetime) -> int:
        [delivery_id] = self.add_deliveries([(source, body, received_at)])
        return delivery_id

    def add_deliveries(self, new: Sequence[tuple[str, bytes, datetime]]) -> list[int]:
        if not new:
            return []
        with self._write_tx() as tx:
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
        with self._tx() as tx:
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
        with self._write_tx() as tx:
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
            fresh = self._add_signals(tx, found) if found else []
        return SplitDeliveries(
            deliveries=len(rows),
            signals=[signal for (signal, _), is_new in zip(found, fresh, strict=True) if is_new],
            duplicates=len(found) - sum(fresh),
            dropped=len(dropped & mine),
        )

    def deliveries_waiting(self) -> int:
        with self._tx() as tx:
            return int(tx.scalar(sa.select(sa.func.count()).select_from(deliveries)) or 0)

    def _insert_new_signals(self) -> Any:
        """One cached statement run as executemany: SQLAlchemy batches it into multi-row
        INSERTs with RETURNING itself, without compiling a statement per webhook."""
        insert = (
            postgresql.insert(signals)
            if self.engine.dialect.name == "postgresql"
            else sqlite.insert(signals)
        )
        return insert.on_conflict_do_nothing(index_elements=[signals.c.dedup_key]).returning(
            signals.c.dedup_key
        )

    def signals(self, node: str | None = None, limit: int = 1000) -> list[Signal]:
        query = sa.select(signals.c.payload).order_by(signals.c.id).limit(limit)
        if node is not None:
            query = query.where(signals.c.node == node)
        with self._tx() as tx:
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
        with self._tx() as tx:
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
        with self._tx() as tx:
            tx.execute(sa.text("SELECT 1"))

    def count_signals(self) -> int:
        with self._tx() as tx:
            return int(tx.scalar(sa.select(sa.func.count()).select_from(signals)) or 0)

    # ---- incidents ------------------------------------------------------------------------

    @staticmethod
    def _incident(row: sa.Row[Any]) -> Incident:
        m = row._mapping
        return Incident(
            id=str(m["id"]),
            cluster=m["cluster"],
            node=m["node"],
            pool=m["pool"],
            rule=m["rule"],
            state=IncidentState(m["state"]),
            severity=m["severity"],
            title=m["title"],
            opened_at=m["opened_at"],
            updated_at=m["updated_at"],
            resolved_at=m["resolved_at"],
            reopened=m["reopened"],
            parent=None if m["parent"] is None else str(m["parent"]),
            chat_ref=m["chat_ref"],
        )

    @staticmethod
    def _append(tx: Connection, entry: TimelineEntry) -> None:
        tx.execute(
            timeline.insert().values(
                incident_id=int(entry.incident),
                at=entry.at,
                actor=entry.actor,
                kind=entry.kind,
                text=entry.text,
                data=dict(entry.data),
            )
        )

    def record_diagnosis(
        self, cluster: str, diagnosis: Diagnosis, now: datetime, reopen_window_s: int
    ) -> tuple[Incident, bool]:
        for _attempt in range(3):
            try:
                return self._record_diagnosis(cluster, diagnosis, now, reopen_window_s)
            except IntegrityError:
                # Another replica opened the same incident a moment ago: use theirs.
                continue
        return self._record_diagnosis(cluster, diagnosis, now, reopen_window_s)

    def _record_diagnosis(
        self, cluster: str, diagnosis: Diagnosis, now: datetime, reopen_window_s: int
    ) -> tuple[Incident, bool]:
        subject = subject_of(diagnosis)
        same = (
            (incidents.c.cluster == cluster)
            & (incidents.c.subject == subject)
            & (incidents.c.rule == diagnosis.rule)
        )
        payload = diagnosis.model_dump(mode="json")
        with self._tx() as tx:
            row = tx.execute(
                sa.select(incidents).where(same & (incidents.c.state != "resolved"))
            ).first()
            if row is not None:
                merged = sorted({*row._mapping["signals"], *diagnosis.signals})
                tx.execute(
                    incidents.update()
                    .where(incidents.c.id == row._mapping["id"])
                    .values(
                        diagnosis=payload,
                        signals=merged,
                        updated_at=now,
                        severity=diagnosis.severity.value,
                        title=diagnosis.title,
                    )
                )
                return self._incident(
                    tx.execute(
                        sa.select(incidents).where(same & (incidents.c.id == row._mapping["id"]))
                    ).one()
                ), False
            recent = tx.execute(
                sa.select(incidents)
                .where(
                    same
                    & (incidents.c.state == "resolved")
                    & (incidents.c.resolved_at >= now - timedelta(seconds=reopen_window_s))
                )
                .order_by(incidents.c.resolved_at.desc())
                .limit(1)
            ).first()
            if recent is not None:
                incident_id = recent._mapping["id"]
                tx.execute(
                    incidents.update()
                    .where(incidents.c.id == incident_id)
                    .values(
                        state=IncidentState.OPEN.value,
                        reopened=incidents.c.reopened + 1,
                        resolved_at=None,
                        updated_at=now,
                        diagnosis=payload,
                        signals=sorted({*recent._mapping["signals"], *diagnosis.signals}),
                    )
                )
                self._append(
                    tx,
                    TimelineEntry(
                        incident=str(incident_id),
                        at=now,
                        actor=GPUBOT,
                        kind="state",
                        text=f"fired again within {reopen_window_s // 60} min of its resolve: "
                        "reopened",
                        data={"from": "resolved", "to": "open"},
                    ),
                )
            else:
                inserted = tx.execute(
                    incidents.insert().values(
                        cluster=cluster,
                        subject=subject,
                        node=diagnosis.node,
                        pool=diagnosis.pool,
                        rule=diagnosis.rule,
                        state=IncidentState.OPEN.value,
                        severity=diagnosis.severity.value,
                        title=diagnosis.title,
                        opened_at=now,
                        updated_at=now,
                        diagnosis=payload,
                        signals=sorted(diagnosis.signals),
                    )
                ).inserted_primary_key
                assert inserted is not None
                incident_id = inserted[0]
                self._append(
                    tx,
                    TimelineEntry(
                        incident=str(incident_id),
                        at=now,
                        actor=GPUBOT,
                        kind="state",
                        text=f"opened: {diagnosis.title}",
                        data={"to": "open", "rule": diagnosis.rule},
                    ),
                )
            row = tx.execute(sa.select(incidents).where(incidents.c.id == incident_id)).one()
            return self._incident(row), True

    def diagnosis(self, incident_id: str) -> Diagnosis | None:
        with self._tx() as tx:
            payload = tx.scalar(
                sa.select(incidents.c.diagnosis).where(incidents.c.id == _int_id(incident_id))
            )
        return None if payload is None else Diagnosis.model_validate(payload)

    def incident(self, incident_id: str) -> Incident:
        with self._tx() as tx:
            row = tx.execute(
                sa.select(incidents).where(incidents.c.id == _int_id(incident_id))
            ).first()
        if row is None:
            raise NotFound(f"no incident {incident_id}")
        return self._incident(row)

    def incidents(
        self, node: str | None = None, states: Sequence[IncidentState] = ()
    ) -> list[Incident]:
        query = sa.select(incidents).order_by(incidents.c.id)
        if node is not None:
            query = query.where(incidents.c.node == node)
        if states:
            query = query.where(incidents.c.state.in_([s.value for s in states]))
        with self._tx() as tx:
            return [self._incident(r) for r in tx.execute(query)]

    def count_incidents(self, states: Sequence[IncidentState]) -> int:
        query = sa.select(sa.func.count()).select_from(incidents)
        query = query.where(incidents.c.state.in_([s.value for s in states]))
        with self._tx() as tx:
            return int(tx.scalar(query) or 0)

    def incidents_for_signal(self, fingerprint: str) -> list[Incident]:
        # JSON containment differs between SQLite and PostgreSQL; the candidates are few
        # (unresolved or recent), so filter in Python.
        with self._tx() as tx:
            rows = tx.execute(sa.select(incidents).order_by(incidents.c.id)).all()
        return [self._incident(r) for r in rows if fingerprint in r._mapping["signals"]]

    def transition(
        self,
        incident_id: str,
        target: IncidentState,
        actor: str,
        now: datetime,
        text: str = "",
        data: Mapping[str, object] | None = None,
    ) -> Incident:
        key = _int_id(incident_id)
        with self._tx() as tx:
            row = tx.execute(
                sa.select(incidents).where(incidents.c.id == key).with_for_update()
            ).first()
            if row is None:
                raise NotFound(f"no incident {incident_id}")
            current = IncidentState(row._mapping["state"])
            check(incident_id, current, target)
            values: dict[str, Any] = {"state": target.value, "updated_at": now}
            if target is IncidentState.RESOLVED:
                values["resolved_at"] = now
                self._withdraw_undecided(tx, key, withdrawal(incident_id, now, text), now)
            # The state in the WHERE makes a concurrent move from the same state lose.
            moved = tx.execute(
                incidents.update()
                .where((incidents.c.id == key) & (incidents.c.state == current.value))
                .values(**values)
            ).rowcount
            if moved != 1:
                raise StateChanged(f"incident {incident_id} changed meanwhile; read it again")
            kind: TimelineKind = "resolve" if target is IncidentState.RESOLVED else "state"
            self._append(
                tx,
                TimelineEntry(
                    incident=incident_id,
                    at=now,
                    actor=actor,
                    kind=kind,
                    text=text or f"{current.value} → {target.value}",
                    data={"from": current.value, "to": target.value, **dict(data or {})},
                ),
            )
            return self._incident(
                tx.execute(sa.select(incidents).where(incidents.c.id == key)).one()
            )

    def set_chat_ref(self, incident_id: str, chat_ref: str) -> None:
        with self._tx() as tx:
            tx.execute(
                incidents.update()
                .where(incidents.c.id == _int_id(incident_id))
                .values(chat_ref=chat_ref)
            )

    def set_parent(self, incident_id: str, parent_id: str) -> None:
        with self._tx() as tx:
            tx.execute(
                incidents.update()
                .where(incidents.c.id == _int_id(incident_id))
                .values(parent=_int_id(parent_id))
            )

    # ---- timeline -------------------------------------------------------------------------

    def append(self, entry: TimelineEntry) -> None:
        with self._tx() as tx:
            self._append(tx, entry)

    def timeline(self, incident_id: str) -> list[TimelineEntry]:
        with self._tx() as tx:
            rows = tx.execute(
                sa.select(timeline)
                .where(timeline.c.incident_id == _int_id(incident_id))
                .order_by(timeline.c.id)
            ).all()
        return [
            TimelineEntry(
                incident=incident_id,
                at=r.at,
                actor=r.actor,
                kind=cast(TimelineKind, r.kind),
                text=r.text,
                data=r.data,
            )
            for r in rows
        ]

    # ---- the chat outbox ------------------------------------------------------------------

    def outbox_put(
        self,
        key: str,
        group_key: str,
        method: str,
        payload: Mapping[str, object],
        now: datetime,
        refers_to: str | None = None,
    ) -> OutboxItem:
        """Queues one chat call; the same key twice is one call (the first)."""
        try:
            with self._tx() as tx:
                tx.execute(
                    outbox.insert().values(
                        key=key,
                        group_key=group_key,
                        method=method,
                        payload=dict(payload),
                        refers_to=refers_to,
                        status="pending",
                        attempts=0,
                        next_attempt_at=now,
                        created_at=now,
                    )
                )
        except IntegrityError:
            pass
        found = self.outbox_item(key)
        assert found is not None
        return found

    def outbox_item(self, key: str) -> OutboxItem | None:
        with self._tx() as tx:
            row = tx.execute(sa.select(outbox).where(outbox.c.key == key)).first()
        return None if row is None else _outbox_item(row)

    def outbox_due(self, now: datetime, limit: int = 50) -> list[OutboxItem]:
        """Pending calls whose time has come and that are first in their group: a later
        message of a group waits for every earlier one, so updates never overtake."""
        earlier = outbox.alias("earlier")
        blocked = (
            sa.select(earlier.c.id)
            .where(
                (earlier.c.group_key == outbox.c.group_key)
                & (earlier.c.status == "pending")
                & (earlier.c.id < outbox.c.id)
            )
            .exists()
        )
        query = (
            sa.select(outbox)
            .where((outbox.c.status == "pending") & (outbox.c.next_attempt_at <= now) & ~blocked)
            .order_by(outbox.c.id)
            .limit(limit)
        )
        with self._tx() as tx:
            return [_outbox_item(r) for r in tx.execute(query)]

    def outbox_sent(self, item_id: int, result: Mapping[str, object], now: datetime) -> bool:
        """Marks a call delivered; False when it already was (another worker sent it)."""
        with self._tx() as tx:
            changed = tx.execute(
                outbox.update()
                .where((outbox.c.id == item_id) & (outbox.c.status == "pending"))
                .values(
                    status="sent", result=dict(result), sent_at=now, attempts=outbox.c.attempts + 1
                )
            ).rowcount
        return changed == 1

    def outbox_retry(
        self, item_id: int, at: datetime, error: str, *, give_up: bool = False
    ) -> None:
        with self._tx() as tx:
            tx.execute(
                outbox.update()
                .where((outbox.c.id == item_id) & (outbox.c.status == "pending"))
                .values(
                    status="failed" if give_up else "pending",
                    next_attempt_at=at,
                    last_error=error[:2000],
                    attempts=outbox.c.attempts + 1,
                )
            )

    def outbox_pending(self) -> int:
        with self._tx() as tx:
            return int(
                tx.scalar(
                    sa.select(sa.func.count())
                    .select_from(outbox)
                    .where(outbox.c.status == "pending")
                )
                or 0
            )

    # ---- requests, votes, executions -----------------------------------------------------

    def add_request(self, request: ActionRequest) -> None:
        with self._tx() as tx:
            tx.execute(
                requests.insert().values(
                    id=request.id,
                    incident_id=None if request.incident is None else _int_id(request.incident),
                    node=request.node,
                    action=request.action.value,
                    expires_at=request.expires_at,
                    payload=request.model_dump(mode="json"),
                )
            )

    def request(self, request_id: str) -> ActionRequest:
        with self._tx() as tx:
            payload = tx.scalar(sa.select(requests.c.payload).where(requests.c.id == request_id))
        if payload is None:
            raise NotFound(f"no action request {request_id}")
        return ActionRequest.model_validate(payload)

    def requests(self, incident_id: str) -> list[ActionRequest]:
        with self._tx() as tx:
            payloads: list[Any] = list(
                tx.scalars(
                    sa.select(requests.c.payload)
                    .where(requests.c.incident_id == _int_id(incident_id))
                    .order_by(requests.c.expires_at)
                )
            )
        return [ActionRequest.model_validate(p) for p in payloads]

    def incidents_waiting_in_vain(self, now: datetime) -> list[str]:
        """Incidents awaiting approval whose every request has expired undecided (no
        execution, no denial): one query, however many incidents wait."""
        live_or_decided = (
            sa.select(requests.c.incident_id)
            .where(
                # NOT IN over a NULL is never true: ad-hoc requests (no incident) stay out.
                requests.c.incident_id.is_not(None)
                & (
                    (requests.c.expires_at > now)
                    | sa.exists().where(executions.c.request_id == requests.c.id)
                )
            )
            .scalar_subquery()
        )
        any_request = sa.exists().where(requests.c.incident_id == incidents.c.id)
        query = (
            sa.select(incidents.c.id)
            .where(
                (incidents.c.state == IncidentState.AWAITING_APPROVAL.value)
                & any_request
                & incidents.c.id.not_in(live_or_decided)
            )
            .order_by(incidents.c.id)
        )
        with self._tx() as tx:
            found: list[int] = list(tx.scalars(query))
        return [str(i) for i in found]

    def requests_to_execute(self, now: datetime) -> list[ActionRequest]:
        """Unexpired requests with at least one vote and no execution yet."""
        voted = sa.select(votes.c.request_id).where(votes.c.request_id == requests.c.id).exists()
        executed = (
            sa.select(executions.c.request_id)
            .where(executions.c.request_id == requests.c.id)
            .exists()
        )
        query = (
            sa.select(requests.c.payload)
            .where((requests.c.expires_at > now) & voted & ~executed)
            .order_by(requests.c.expires_at)
        )
        with self._tx() as tx:
            payloads: list[Any] = list(tx.scalars(query))
        return [ActionRequest.model_validate(p) for p in payloads]

    def add_vote(self, vote: Vote) -> bool:
        """One vote per person: a double click meets the unique constraint."""
        try:
            with self._tx() as tx:
                tx.execute(
                    votes.insert().values(
                        request_id=vote.request_id, approver=vote.approver, at=vote.at
                    )
                )
        except IntegrityError:
            return False
        return True

    def votes(self, request_id: str) -> list[Vote]:
        with self._tx() as tx:
            rows = tx.execute(
                sa.select(votes).where(votes.c.request_id == request_id).order_by(votes.c.id)
            ).all()
        return [Vote(request_id=r.request_id, approver=r.approver, at=r.at) for r in rows]

    def claim_execution(self, request_id: str, executor: str, now: datetime) -> bool:
        with self._tx() as tx:
            incident_id = tx.scalar(
                sa.select(requests.c.incident_id).where(requests.c.id == request_id)
            )
            if incident_id is not None:
                # Locked with the claim: a resolve (which withdraws) and a claim never
                # interleave. A request whose incident was resolved by a gpubot that did not
                # withdraw yet is withdrawn here instead of claimed.
                incident = tx.execute(
                    sa.select(incidents.c.state, incidents.c.resolved_at)
                    .where(incidents.c.id == incident_id)
                    .with_for_update()
                ).one()
                if incident.state == IncidentState.RESOLVED.value:
                    detail = withdrawal(str(incident_id), incident.resolved_at or now)
                    self._insert_execution(
                        tx,
                        request_id,
                        executor=GPUBOT,
                        outcome="withdrawn",
                        detail=detail,
                        now=now,
                        finished=True,
                    )
                    return False
            return self._insert_execution(
                tx, request_id, executor=executor, outcome="running", detail="", now=now
            )

    def _insert_execution(
        self,
        tx: Connection,
        request_id: str,
        *,
        executor: str,
        outcome: ExecutionOutcome,
        detail: str,
        now: datetime,
        finished: bool = False,
    ) -> bool:
        """One execution row inside `tx`, or False when the request already has one."""
        insert = (
            postgresql.insert(executions)
            if self.engine.dialect.name == "postgresql"
            else sqlite.insert(executions)
        )
        inserted = tx.scalar(
            insert.values(
                request_id=request_id,
                executor=executor,
                started_at=now,
                heartbeat_at=None if finished else now,
                finished_at=now if finished else None,
                outcome=outcome,
                detail=detail,
            )
            .on_conflict_do_nothing(index_elements=[executions.c.request_id])
            .returning(executions.c.request_id)
        )
        return inserted is not None

    def _withdraw_undecided(
        self, tx: Connection, incident_key: int, detail: str, now: datetime
    ) -> None:
        """Every request of the incident without an execution gets a finished `withdrawn`
        one; an execution still running makes the resolve wait (`StateChanged`)."""
        rows = tx.execute(
            sa.select(requests.c.id, executions.c.finished_at, executions.c.outcome)
            .select_from(requests.outerjoin(executions, executions.c.request_id == requests.c.id))
            .where(requests.c.incident_id == incident_key)
        ).all()
        if any(r.outcome is not None and r.finished_at is None for r in rows):
            raise StateChanged(
                f"incident {incident_key}: an approved action is running; resolve it afterwards"
            )
        for row in rows:
            if row.outcome is None:
                self._insert_execution(
                    tx,
                    row.id,
                    executor=GPUBOT,
                    outcome="withdrawn",
                    detail=detail,
                    now=now,
                    finished=True,
                )

    def record_withdrawal(self, request_id: str, detail: str, now: datetime) -> bool:
        with self._tx() as tx:
            return self._insert_execution(
                tx,
                request_id,
                executor=GPUBOT,
                outcome="withdrawn",
                detail=detail,
                now=now,
                finished=True,
            )

    def finish_execution(
        self,
        request_id: str,
        outcome: ExecutionOutcome,
        detail: str,
        now: datetime,
        executor: str | None = None,
    ) -> bool:
        where = executions.c.request_id == request_id
        if executor is not None:
            where &= (executions.c.executor == executor) & executions.c.finished_at.is_(None)
        with self._tx() as tx:
            result = tx.execute(
                executions.update()
                .where(where)
                .values(outcome=outcome, detail=detail, finished_at=now)
            )
        return bool(result.rowcount)

    @staticmethod
    def _execution(row: sa.Row[Any]) -> ExecutionRecord:
        return ExecutionRecord(
            request_id=row.request_id,
            executor=row.executor,
            started_at=row.started_at,
            finished_at=row.finished_at,
            outcome=cast(ExecutionOutcome, row.outcome),
            detail=row.detail,
            heartbeat_at=row.heartbeat_at,
        )

    def mark_acting(self, request_id: str, executor: str) -> None:
        with self._tx() as tx:
            tx.execute(
                executions.update()
                .where(
                    (executions.c.request_id == request_id)
                    & (executions.c.executor == executor)
                    & executions.c.finished_at.is_(None)
                )
                .values(outcome="acting")
            )

    def record_denial(self, request_id: str, who: str, reason: str, now: datetime) -> bool:
        with self._tx() as tx:
            return self._insert_execution(
                tx,
                request_id,
                executor=who,
                outcome="denied",
                detail=reason,
                now=now,
                finished=True,
            )

    def beat(self, request_id: str, executor: str, now: datetime) -> bool:
        with self._tx() as tx:
            result = tx.execute(
                executions.update()
                .where(
                    (executions.c.request_id == request_id)
                    & (executions.c.executor == executor)
                    & executions.c.finished_at.is_(None)
                )
                .values(heartbeat_at=now)
            )
        return bool(result.rowcount)

    def take_over_execution(
        self, request_id: str, executor: str, now: datetime, stale_before: datetime
    ) -> bool:
        last_sign_of_life = sa.func.coalesce(executions.c.heartbeat_at, executions.c.started_at)
        with self._tx() as tx:
            result = tx.execute(
                executions.update()
                .where(
                    (executions.c.request_id == request_id)
                    & executions.c.finished_at.is_(None)
                    & ((executions.c.executor == executor) | (last_sign_of_life < stale_before))
                )
                .values(executor=executor, heartbeat_at=now)
            )
        return bool(result.rowcount)

    def execution(self, request_id: str) -> ExecutionRecord | None:
        with self._tx() as tx:
            row = tx.execute(
                sa.select(executions).where(executions.c.request_id == request_id)
            ).first()
        return None if row is None else self._execution(row)

    def unfinished_executions(self) -> list[ExecutionRecord]:
        with self._tx() as tx:
            rows = tx.execute(
                sa.select(executions)
                .where(executions.c.finished_at.is_(None))
                .order_by(executions.c.started_at)
            ).all()
        return [self._execution(r) for r in rows]


def _outbox_item(row: sa.Row[Any]) -> OutboxItem:
    m = row._mapping
    return OutboxItem(
        id=m["id"],
        key=m["key"],
        group_key=m["group_key"],
        method=m["method"],
        payload=m["payload"],
        refers_to=m["refers_to"],
        status=m["status"],
        attempts=m["attempts"],
        next_attempt_at=m["next_attempt_at"],
        last_error=m["last_error"],
        result=m["result"],
    )


def _int_id(incident_id: str) -> int:
    try:
        return int(incident_id)
    except ValueError:
        raise NotFound(f"no incident {incident_id!r}: incident ids are numbers") from None


def migrate(url: str) -> tuple[str | None, str]:
    """`gpubot db upgrade`: (revision before, revision after)."""
    engine = _create_engine(url, lock_timeout_s=30)
    try:
        before = schema.current(engine)
        schema.upgrade(engine)
        return before, schema.head()
    except DBAPIError as exc:
        raise StoreUnavailable(f"store {url}: {exc.orig or exc}") from exc
    finally:
        engine.dispose()
