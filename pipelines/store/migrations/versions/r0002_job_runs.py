"""Job-run history of the scheduler: one row per run of a scheduled job.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

# Copies of the column types as they were at this revision (see 0001).
_TIMESTAMP = sa.DateTime(timezone=True)
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the ``job_runs`` table."""
    op.create_table(
        "job_runs",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("job", sa.String(50), nullable=False),
        sa.Column("started_at", _TIMESTAMP, nullable=False),
        sa.Column("finished_at", _TIMESTAMP, nullable=True),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("problems", _JSON, nullable=False),
        sa.Column("details", _JSON, nullable=False),
        sa.Column("runner", sa.String(200), nullable=False),
    )
    op.create_index("ix_job_runs_job_started", "job_runs", ["job", "started_at"])


def downgrade() -> None:
    """Drop the ``job_runs`` table."""
    op.drop_index("ix_job_runs_job_started", table_name="job_runs")
    op.drop_table("job_runs")
