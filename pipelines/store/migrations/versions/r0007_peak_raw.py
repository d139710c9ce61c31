"""Peak forecasts keep the model's raw quantiles and scale beside the served ones.

``quantiles`` now holds the bound the service provisions at (the model's quantiles
calibrated and combined online, :mod:`forecaster.peak.online`); ``raw`` the model's
own quantiles and ``scale`` the series' scale at the origin, which the next forecast
job's online calibration learns from. Rows stored before hold neither (NULL): they
teach the online state nothing.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 20:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None

# Copies of the column types as they are at this revision (see 0001).
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    """Add ``raw`` and ``scale`` to ``peak_forecasts``."""
    with op.batch_alter_table("peak_forecasts") as batch:
        batch.add_column(sa.Column("raw", _JSON, nullable=True))
        batch.add_column(sa.Column("scale", sa.Double(), nullable=True))


def downgrade() -> None:
    """Drop ``raw`` and ``scale``."""
    with op.batch_alter_table("peak_forecasts") as batch:
        batch.drop_column("scale")
        batch.drop_column("raw")
