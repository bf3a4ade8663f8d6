"""deliveries: a delivery that cannot be split is quarantined (kept, with when and why)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Two ADD COLUMNs of nullable columns: no table rewrite on either database (batch mode
    # is not needed for SQLite's ALTER TABLE ... ADD COLUMN).
    op.add_column("deliveries", sa.Column("quarantined_at", sa.DateTime(timezone=True)))
    op.add_column("deliveries", sa.Column("quarantine_reason", sa.String(500)))


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("quarantine_reason")
        batch.drop_column("quarantined_at")
