"""Pool state: a version, bumped by every write, for compare-and-set across replicas.

A replica writes a pool's stabilisation state only if the version it read is still
the stored one; existing rows start at version 0.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-10 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add ``version`` (0 for the states already stored)."""
    with op.batch_alter_table("pool_state") as batch:
        batch.add_column(sa.Column("version", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    """Drop ``version``."""
    with op.batch_alter_table("pool_state") as batch:
        batch.drop_column("version")
