"""Peak forecasts say the level they were held at after an idle spell.

``return_level``: the level demand had before an idle spell it has just come back
from, which the served quantiles from the median up are held at or above
(:mod:`forecaster.peak.recovery`); NULL where the rule was silent and in rows stored
before.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05 19:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add ``return_level`` to ``peak_forecasts``."""
    with op.batch_alter_table("peak_forecasts") as batch:
        batch.add_column(sa.Column("return_level", sa.Double(), nullable=True))


def downgrade() -> None:
    """Drop ``return_level``."""
    with op.batch_alter_table("peak_forecasts") as batch:
        batch.drop_column("return_level")
