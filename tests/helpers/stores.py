"""The stores the contract tests run on: a SQLite file, and a fresh schema in the PostgreSQL
on this machine (`GPUBOT_TEST_POSTGRES`, default postgresql://postgres@127.0.0.1:5432/test)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.store.sql import SqlStore

POSTGRES = os.environ.get("GPUBOT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def postgres_answers() -> str | None:
    """None when PostgreSQL answers, else why not."""
    try:
        engine = sa.create_engine(
            POSTGRES.replace("postgresql://", "postgresql+psycopg://", 1),
            connect_args={"connect_timeout": 2},
        )
        with engine.connect() as connection:
            connection.execute(sa.text("select 1"))
        engine.dispose()
    except Exception as exc:
        return f"no PostgreSQL answers at {POSTGRES}: {exc}"
    return None


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A URL whose connections see only a new, empty schema; dropped afterwards."""
    name = f"gpubot_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(POSTGRES.replace("postgresql://", "postgresql+psycopg://", 1))
    with admin.begin() as connection:
        connection.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    try:
        yield f"{POSTGRES}?options=-csearch_path%3D{name}"
    finally:
        with admin.begin() as connection:
            connection.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
        admin.dispose()


@contextmanager
def open_store(kind: str, tmp_path: Path) -> Iterator[SqlStore]:
    if kind == "sqlite":
        store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
        try:
            yield store
        finally:
            store.close()
        return
    with postgres_schema() as url:
        store = SqlStore.open(url)
        try:
            yield store
        finally:
            store.close()


_NO_POSTGRES = postgres_answers()
STORE_KINDS = [
    "sqlite",
    pytest.param(
        "postgresql",
        marks=pytest.mark.skipif(_NO_POSTGRES is not None, reason=str(_NO_POSTGRES)),
    ),
]
"""`@pytest.fixture(params=STORE_KINDS)`: a test on both stores, PostgreSQL skipped with the
reason when none answers."""
