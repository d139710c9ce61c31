"""Forecast runs: a run's per-horizon and peak rows become visible together.

``forecast_runs`` holds one row per complete run, written in the same transaction as
the run's ``forecasts`` and ``peak_forecasts`` rows; readers take only rows of a
recorded run. Runs stored before this revision are recorded as they are (each
``(model_version, generated_at)`` of ``forecasts``, with no ``observed_until``), so a
service upgraded in place keeps serving what it served.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06 21:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None

# A copy of the column type as it is at this revision (see 0001).
_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create ``forecast_runs`` and record the runs already stored."""
    op.create_table(
        "forecast_runs",
        sa.Column("model_version", sa.String(100), primary_key=True),
        sa.Column("generated_at", _TIMESTAMP, primary_key=True),
        sa.Column("series", sa.Integer(), nullable=False),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("peak_rows", sa.Integer(), nullable=False),
        sa.Column("observed_until", _TIMESTAMP, nullable=True),
    )
    op.execute(
        "INSERT INTO forecast_runs (model_version, generated_at, series, rows, peak_rows) "
        "SELECT f.model_version, f.generated_at, COUNT(DISTINCT f.series_id), COUNT(*), "
        "(SELECT COUNT(*) FROM peak_forecasts p WHERE p.model_version = f.model_version "
        "AND p.generated_at = f.generated_at) "
        "FROM forecasts f GROUP BY f.model_version, f.generated_at"
    )


def downgrade() -> None:
    """Drop ``forecast_runs``."""
    op.drop_table("forecast_runs")
