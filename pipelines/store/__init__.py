"""The store: samples, forecasts, recommendations, pool state and the webhook outbox.

Details: docs/jobs.md, "Notes from the code", `pipelines/store/__init__.py`."""
