"""Peak forecasts: quantiles of the demand peak over a pool's lead time.

One row per series, generation time and lead (in steps): the forecast origin, the
window's end, the demand at the origin and the quantiles of the peak. The forecast
job writes them beside the per-horizon rows of ``forecasts``; the service reads them.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

# Copies of the column types as they are at this revision (see 0001).
_TIMESTAMP = sa.DateTime(timezone=True)
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    """Create ``peak_forecasts``."""
    op.create_table(
        "peak_forecasts",
        sa.Column("series_id", sa.String(200), primary_key=True),
        sa.Column("generated_at", _TIMESTAMP, primary_key=True),
        sa.Column("lead", sa.Integer(), primary_key=True),
        sa.Column("origin", _TIMESTAMP, nullable=False),
        sa.Column("ds", _TIMESTAMP, nullable=False),
        sa.Column("model_version", sa.String(100), nullable=False),
        sa.Column("last", sa.Double(), nullable=False),
        sa.Column("quantiles", _JSON, nullable=False),
    )
    op.create_index(
        "ix_peak_forecasts_series_version", "peak_forecasts", ["series_id", "model_version"]
    )


def downgrade() -> None:
    """Drop ``peak_forecasts``."""
    op.drop_index("ix_peak_forecasts_series_version", table_name="peak_forecasts")
    op.drop_table("peak_forecasts")
