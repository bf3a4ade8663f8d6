"""The Store port on SQLAlchemy: SQLite by default, PostgreSQL for replicas. The only package
that imports SQLAlchemy or Alembic."""
