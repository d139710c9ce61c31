"""The store: samples, forecasts, recommendations, pool state and the webhook outbox.

SQLAlchemy 2 over a SQLite file by default or PostgreSQL by URL; the schema is
migrated with Alembic when the store is opened (:func:`open_store`).
"""
