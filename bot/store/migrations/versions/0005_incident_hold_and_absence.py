"""incidents: held_until (proposals held while a better diagnosis may follow) and absent_since
(the symptom's absence, for resolving only once it has stayed away)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("held_until", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("absent_since", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("absent_since")
        batch.drop_column("held_until")
