"""A read of the webhook outbox that only tests need: one item as stored."""

from __future__ import annotations

from dataclasses import fields

from sqlalchemy.orm import Session

from pipelines.store.outbox import OutboxItem
from pipelines.store.schema import OutboxRow
from pipelines.store.store import Store


def stored_item(store: Store, item_id: int) -> OutboxItem | None:
    """Return outbox item ``item_id`` as stored, or None."""
    with Session(store.engine) as session:
        row = session.get(OutboxRow, item_id)
        if row is None:
            return None
        values = {f.name: getattr(row, f.name) for f in fields(OutboxItem)}
        return OutboxItem(**{**values, "body": bytes(row.body)})
