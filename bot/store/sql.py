"""`SqlStore`: the Store port on SQLAlchemy Core, made of its four parts over one database.
One method, one transaction.

Exactly-once lives in constraints, not in memory: a signal's dedup key, one unresolved
incident per (cluster, subject, rule), one vote per person and request, one execution per
request. A caller that loses a race sees the constraint, never a duplicate.

Why the parts are mixed in rather than held and delegated to: `Store` is one object to its
callers (the service, the Slack adapter and the CLI each take one), and a delegating
`SqlStore` would repeat the port's nearly forty signatures, each a copy that can drift,
or forward by `__getattr__`, which mypy cannot check. A part keeps no state but its `db`
(`bot.store.database.Part`), no two parts define the same name
(`tests/unit/test_store_parts.py`), and each part explicitly implements its own Protocol, so
mypy checks every method against the port where it is written. SQLite's write turn is
the one `Database`'s, not a part's: splitting the store gave SQLite no second writer.

This module must never grow queries of its own: a query belongs to the part whose tables it
answers for. It opens, checks the schema, closes and migrates; that is all.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from bot.errors import StoreSchemaError, StoreUnavailable
from bot.ports import Store
from bot.store import migrating
from bot.store.actions import ExecutionRecord, SqlActions
from bot.store.database import Database, create_engine, sqlite_file
from bot.store.incidents import SqlIncidents
from bot.store.outbox import SqlOutbox
from bot.store.signals import SqlSignals, signal_key

__all__ = ["ExecutionRecord", "SqlStore", "migrate", "signal_key"]


class SqlStore(SqlSignals, SqlIncidents, SqlOutbox, SqlActions, Store):
    """Everything gpubot must not lose or do twice, in one SQLite file or PostgreSQL
    database: signals and deliveries, incidents and timelines, the chat outbox, and
    requests with their votes and executions.

    Owns: the engine's life (`open` checks the schema before anything is read; `close`).
    Never: holds a transaction across a network call or a call back into the pipeline,
    decides policy (which move, whose vote, whether to act: the callers'), or migrates a
    database that has a schema already (`gpubot db upgrade` does, when a person runs it).
    """

    def __init__(self, engine: Engine, url_for_humans: str) -> None:
        super().__init__(Database(engine, url_for_humans))
        self.engine = engine
        self.url = url_for_humans

    @classmethod
    def open(
        cls, url: str, *, lock_timeout_s: float = 5.0, migrate: bool = True, create: bool = True
    ) -> SqlStore:
        """Connects and checks the schema (migrating an empty database when `migrate`).
        Not `create`: for the commands that only read the store `gpubot serve` made, or add a
        vote to it; no database file or schema is created, and a missing one is an error
        naming the store looked for."""
        file = sqlite_file(url)
        if not create and file is not None and not file.is_file():
            raise StoreSchemaError(
                f"no gpubot store at {url} (the file {file.resolve()} does not exist): give "
                "the store `gpubot serve` uses (--store-url, or store_url in the settings)"
            )
        engine = create_engine(url, lock_timeout_s)
        shown = make_url(url).render_as_string(hide_password=True)
        store = cls(engine, shown)
        if migrate or not create:
            try:
                with store.db.translated():
                    migrating.ensure_current(engine, shown, create=create)
            except BaseException:
                store.close()
                raise
        return store

    def close(self) -> None:
        self.engine.dispose()


def migrate(url: str) -> tuple[str | None, str]:
    """`gpubot db upgrade`: (revision before, revision after)."""
    engine = create_engine(url, lock_timeout_s=30)
    try:
        before = migrating.current(engine)
        migrating.upgrade(engine)
        return before, migrating.head()
    except DBAPIError as exc:
        raise StoreUnavailable(f"store {url}: {exc.orig or exc}") from exc
    finally:
        engine.dispose()
