"""Initial schema: samples, forecasts, recommendations, pool state, webhook outbox.

Revision ID: 0001
Revises:
Create Date: 2025-01-01 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

# Copies of the column types as they were at this revision: a migration must not
# change meaning when schema.py evolves.
_TIMESTAMP = sa.DateTime(timezone=True)
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the store's tables."""
    op.create_table(
        "samples",
        sa.Column("series_id", sa.String(200), primary_key=True),
        sa.Column("ts", _TIMESTAMP, primary_key=True),
        sa.Column("value", sa.Double(), nullable=False),
    )
    op.create_table(
        "forecasts",
        sa.Column("series_id", sa.String(200), primary_key=True),
        sa.Column("generated_at", _TIMESTAMP, primary_key=True),
        sa.Column("step", sa.Integer(), primary_key=True),
        sa.Column("ds", _TIMESTAMP, nullable=False),
        sa.Column("model_version", sa.String(100), nullable=False),
        sa.Column("model", sa.String(100), nullable=True),
        sa.Column("mean", sa.Double(), nullable=False),
        sa.Column("quantiles", _JSON, nullable=False),
    )
    op.create_index("ix_forecasts_series_ds", "forecasts", ["series_id", "ds"])
    op.create_table(
        "recommendations",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("pool", sa.String(100), nullable=False),
        sa.Column("generated_at", _TIMESTAMP, nullable=False),
        sa.Column("desired_nodes", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(50), nullable=False),
        sa.Column("payload", _JSON, nullable=False),
    )
    op.create_index(
        "ix_recommendations_pool_generated", "recommendations", ["pool", "generated_at"]
    )
    op.create_table(
        "pool_state",
        sa.Column("pool", sa.String(100), primary_key=True),
        sa.Column("updated_at", _TIMESTAMP, nullable=False),
        sa.Column("state", _JSON, nullable=False),
    )
    op.create_table(
        "webhook_outbox",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("target_url", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", _TIMESTAMP, nullable=False),
        sa.Column("delivered_at", _TIMESTAMP, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.UniqueConstraint("target_url", "idempotency_key", name="uq_webhook_outbox_target_key"),
    )
    op.create_index("ix_webhook_outbox_due", "webhook_outbox", ["delivered_at", "next_attempt_at"])


def downgrade() -> None:
    """Drop the store's tables."""
    op.drop_index("ix_webhook_outbox_due", table_name="webhook_outbox")
    op.drop_table("webhook_outbox")
    op.drop_table("pool_state")
    op.drop_index("ix_recommendations_pool_generated", table_name="recommendations")
    op.drop_table("recommendations")
    op.drop_index("ix_forecasts_series_ds", table_name="forecasts")
    op.drop_table("forecasts")
    op.drop_table("samples")
