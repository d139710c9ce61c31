"""The store: samples, forecasts, recommendations, pool state and the webhook outbox.

SQLAlchemy 2 over a SQLite file by default or PostgreSQL by URL; the schema is
migrated with Alembic when the store is opened (:func:`open_store`).
"""

from pipelines.store.engine import display_url
from pipelines.store.forecasts import ForecastRepository
from pipelines.store.outbox import Backoff, OutboxItem, OutboxRepository, RetryOutcome
from pipelines.store.recommendations import Recommendation, RecommendationRepository
from pipelines.store.samples import SampleRepository
from pipelines.store.state import PoolStateRepository, StoredState
from pipelines.store.store import Store, open_store

__all__ = [
    "Backoff",
    "ForecastRepository",
    "OutboxItem",
    "OutboxRepository",
    "PoolStateRepository",
    "Recommendation",
    "RecommendationRepository",
    "RetryOutcome",
    "SampleRepository",
    "Store",
    "StoredState",
    "display_url",
    "open_store",
]
