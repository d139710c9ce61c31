"""Who leads the scheduler, and since when: one row, replaced by each new leader.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

# Copies of the column types as they were at this revision (see 0001).
_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the ``scheduler_leader`` table."""
    op.create_table(
        "scheduler_leader",
        sa.Column("slot", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("since", _TIMESTAMP, nullable=False),
    )


def downgrade() -> None:
    """Drop the ``scheduler_leader`` table."""
    op.drop_table("scheduler_leader")
