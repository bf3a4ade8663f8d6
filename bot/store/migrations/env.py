"""Alembic's entry point: run by `gpubot db upgrade` and by `open_store` on an empty database,
always with the connection handed over in `config.attributes`."""

from __future__ import annotations

from alembic import context

from bot.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("gpubot runs its migrations with a connection; use `gpubot db upgrade`")
# Batch mode lets later migrations alter SQLite tables (it has no ALTER COLUMN).
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
