"""The scheduler: APScheduler jobs on the store's database, run by one leader.

Details: docs/scheduler.md, "Notes from the code", `pipelines/scheduler/__init__.py`."""
