"""The one database under every part of the store: how it is connected to, how its errors
become gpubot's, and how a transaction is begun.

Why a module of its own: the parts (`signals`, `incidents`, `outbox`, `actions`) each own
their tables, but none of them invents a transaction. They all begin one here, have the
driver's errors translated here, once, keeping the cause, and on SQLite take the same one
write turn, so splitting the store into parts never gave SQLite a second writer to wait for.

What it must never do: know what a row means (the execution row that a claim and a resolve
both write, `insert_execution`, is the one exception, and it decides nothing: the caller says
which outcome), decide policy, or hold a transaction open across a network call or a call
back into the pipeline (the `split` of `SqlSignals.split_deliveries` runs between two
transactions, not inside one).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Dialect, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
)
from sqlalchemy.sql.dml import ReturningInsert

from bot.errors import InputError, NotFound, StoreUnavailable
from bot.model import ExecutionOutcome
from bot.store.tables import executions

STORE_URL_EXAMPLES = "sqlite:///gpubot.db or postgresql://user@host/gpubot"


def parse_store_url(url: str) -> URL:
    """The store URL, or an `InputError` a person can act on: SQLAlchemy's own errors name
    a plugin loader, not the setting."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InputError(
            "store_url", f"{url!r} is not a database URL (e.g. {STORE_URL_EXAMPLES})"
        ) from None
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise InputError(
            "store_url",
            f"{parsed.get_backend_name()!r} databases are not supported: use SQLite or "
            f"PostgreSQL (e.g. {STORE_URL_EXAMPLES})",
        )
    return parsed


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names (None for an in-memory database or another backend)."""
    parsed = parse_store_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or database is None or database in ("", ":memory:"):
        return None
    return Path(database)


def create_engine(url: str, lock_timeout_s: float) -> Engine:
    """SQLite with WAL and foreign keys on; a bare `postgresql://` on psycopg 3. A URL that
    is no database's, or whose driver is not installed, is an `InputError`."""
    try:
        return _create_engine(url, lock_timeout_s)
    except (NoSuchModuleError, ModuleNotFoundError) as exc:
        raise InputError(
            "store_url", f"no driver for {make_url(url).drivername!r} is installed ({exc})"
        ) from None


def _create_engine(url: str, lock_timeout_s: float) -> Engine:
    parsed = parse_store_url(url)
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
    engine = sa.create_engine(
        parsed,
        pool_pre_ping=True,
        connect_args={"connect_timeout": max(1, int(lock_timeout_s))},
    )

    @event.listens_for(engine, "connect")
    def _session_limits(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(
                f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_S * 1000}"
            )
        dbapi_connection.commit()

    return engine


IDLE_IN_TRANSACTION_S = 10
"""How long PostgreSQL lets a session of gpubot sit inside a transaction with nothing to do
before it ends the session and lets go of its locks. No transaction of gpubot waits on anything
but the database between two statements (no cluster, no Slack inside one), so a session idle
that long belongs to a process that is frozen (SIGSTOP, a VM paused, a stalled collector) or
cut off. Without it a replica frozen between a timeline INSERT and its COMMIT holds the
incident's row lock for as long as it sleeps, and every other replica's next write about that
incident (the take-over of its drain among them) waits behind it."""


class Database:
    """One engine and the way every part of the store uses it.

    Owns: the engine, the URL as shown to people (no password), and SQLite's write turn.
    Never: holds a connection between calls, retries (a caller that may retry knows it, see
    `SqlIncidents.record_diagnosis`), or swallows a constraint (`IntegrityError` is the
    caller's: it is how a lost race is told).
    """

    def __init__(self, engine: Engine, url_for_humans: str) -> None:
        self.engine = engine
        self.url = url_for_humans
        # SQLite has one writer, and a connection that finds the lock taken sleeps 1, 2, 5,
        # 10 ms... before it looks again. The webhook's threads take turns here instead, and
        # each goes the moment the one before commits.
        self._write_turn: AbstractContextManager[Any] = (
            threading.Lock() if engine.dialect.name == "sqlite" else nullcontext()
        )

    @contextmanager
    def translated(self) -> Iterator[None]:
        """A database that is down, locked or gone mid-query is `StoreUnavailable`; a
        constraint is the caller's to handle; anything else is a bug and propagates."""
        with unavailable_as_store_errors(f"store {self.url}"):
            yield

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back when it raises."""
        with self.translated(), self.engine.begin() as connection:
            yield connection

    @contextmanager
    def write_tx(self) -> Iterator[Connection]:
        """A transaction that writes from its first statement, for the hot paths."""
        with self._write_turn, self.tx() as connection:
            yield connection


@contextmanager
def unavailable_as_store_errors(where: str = "store") -> Iterator[None]:
    """A database down, locked, full, read-only or gone mid-query is `StoreUnavailable`; a
    constraint is the caller's to handle; anything else is a bug and propagates. Also for
    queries gpubot does not make itself (APScheduler's job store on the store's engine)."""
    try:
        yield
    except IntegrityError:
        raise
    except DBAPIError as exc:
        if isinstance(exc, OperationalError) or exc.connection_invalidated:
            raise StoreUnavailable(f"{where}: {exc.orig or exc}") from exc
        raise


class Part:
    """What every part of the store is built on: the one `Database` they share. A part
    keeps no other state, so `SqlStore` can be all of them over one database."""

    def __init__(self, db: Database) -> None:
        self.db = db


def insert_once(table: sa.Table, key: sa.Column[Any], dialect: Dialect) -> ReturningInsert[Any]:
    """INSERT … ON CONFLICT (`key`) DO NOTHING RETURNING `key`: the key comes back for a row
    this statement stored and not for one that was there before, so a lost race is an
    answer, never an `IntegrityError` that would roll back the caller's transaction."""
    insert = postgresql.insert(table) if dialect.name == "postgresql" else sqlite.insert(table)
    return insert.on_conflict_do_nothing(index_elements=[key]).returning(key)


def insert_execution(
    tx: Connection,
    request_id: str,
    executor: str,
    outcome: ExecutionOutcome,
    detail: str,
    now: datetime,
) -> bool:
    """The request's one execution row, inside `tx`; False when it already has one. Outcome
    `running` is a claim (unfinished, its heartbeat now); any other (`denied`, `withdrawn`)
    decides the request without acting, finished in this one INSERT. This is how a claim, a
    denial and a withdrawal (by `SqlActions`, and by `SqlIncidents.transition` on a resolve)
    each decide a request at most once."""
    finished = outcome != "running"
    inserted = tx.scalar(
        insert_once(executions, executions.c.request_id, tx.dialect).values(
            request_id=request_id,
            executor=executor,
            started_at=now,
            heartbeat_at=None if finished else now,
            finished_at=now if finished else None,
            outcome=outcome,
            detail=detail,
        )
    )
    return inserted is not None


def int_id(incident_id: str) -> int:
    """An incident id as the database keeps it; `NotFound` for one that cannot exist."""
    try:
        return int(incident_id)
    except ValueError:
        raise NotFound(f"no incident {incident_id!r}: incident ids are numbers") from None
