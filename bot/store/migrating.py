"""Which schema a database has, and bringing it to ours: Alembic, run programmatically.

An empty database is migrated on first start (the demo's SQLite file just works). A database
at an older revision, or at one this gpubot does not know, is refused with the command to
run: migrating production without a person deciding to is how outages start.
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from bot.errors import StoreSchemaError

MIGRATIONS = "bot.store:migrations"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    return config


def head() -> str:
    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert revision is not None
    return revision


def current(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


MIGRATION_LOCK = 0x67707562  # "gpub": the PostgreSQL advisory lock all replicas agree on


def upgrade(engine: Engine, target: str = "head") -> None:
    """Migrate in one transaction. On PostgreSQL an advisory lock makes replicas that start
    together take turns, and the one that waited finds the schema current and does nothing."""
    config = alembic_config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        config.attributes["connection"] = connection
        command.upgrade(config, target)


def _upgrade_empty(engine: Engine) -> None:
    try:
        upgrade(engine)
    except DBAPIError:
        # Another process created the schema between our look and our CREATE (SQLite has no
        # advisory lock): fine when what it made is ours.
        if current(engine) != head():
            raise


def ensure_current(engine: Engine, url_for_humans: str, *, create: bool = True) -> None:
    """Migrate an empty database (unless not `create`: a command that only reads must not
    leave an empty store behind that looks like a quiet day); accept ours; refuse anything
    else with what to do."""
    revision = current(engine)
    if revision is None:
        if inspect(engine).get_table_names():
            raise StoreSchemaError(
                f"the database at {url_for_humans} has tables but no gpubot schema version: "
                "is it another application's database? Point GPUBOT_STORE_URL elsewhere"
            )
        if not create:
            raise StoreSchemaError(
                f"no gpubot store at {url_for_humans}: the database is empty "
                "(`gpubot serve` creates the store; is this the store it uses?)"
            )
        _upgrade_empty(engine)
        return
    ours = head()
    if revision == ours:
        return
    scripts = ScriptDirectory.from_config(alembic_config())
    known = {script.revision for script in scripts.walk_revisions()}
    if revision in known:
        raise StoreSchemaError(
            f"the database at {url_for_humans} has schema {revision}, this gpubot needs {ours}: "
            f"run `gpubot db upgrade --store-url {url_for_humans}` (back it up first)"
        )
    raise StoreSchemaError(
        f"the database at {url_for_humans} has schema {revision}, which this gpubot does not "
        f"know (it knows up to {ours}): a newer gpubot migrated it; run that version"
    )
