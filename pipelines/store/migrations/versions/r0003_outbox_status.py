"""Webhook outbox: an explicit status (pending, delivered, dead) and when it died.

Before, a dead letter was stored as delivered (``delivered_at`` set) with its
``last_error`` kept. Existing rows are classified by that rule: delivered with an
error is ``dead`` (its ``delivered_at`` moves to ``dead_at``), delivered without one
is ``delivered``, the rest ``pending``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Add ``status`` and ``dead_at``, classify existing rows, index the status."""
    with op.batch_alter_table("webhook_outbox") as batch:
        batch.add_column(
            sa.Column("status", sa.String(20), nullable=False, server_default="pending")
        )
        batch.add_column(sa.Column("dead_at", _TIMESTAMP, nullable=True))
    op.execute(
        "UPDATE webhook_outbox SET status = 'dead', dead_at = delivered_at, "
        "delivered_at = NULL WHERE delivered_at IS NOT NULL AND last_error IS NOT NULL"
    )
    op.execute(
        "UPDATE webhook_outbox SET status = 'delivered' "
        "WHERE delivered_at IS NOT NULL AND last_error IS NULL"
    )
    op.create_index("ix_webhook_outbox_status_due", "webhook_outbox", ["status", "next_attempt_at"])


def downgrade() -> None:
    """Back to dead letters stored as delivered with their error."""
    op.execute("UPDATE webhook_outbox SET delivered_at = dead_at WHERE status = 'dead'")
    op.drop_index("ix_webhook_outbox_status_due", table_name="webhook_outbox")
    with op.batch_alter_table("webhook_outbox") as batch:
        batch.drop_column("dead_at")
        batch.drop_column("status")
