"""Getting data and running work on a clock: sources, store, jobs, scheduler, simulator.

Details: docs/jobs.md, "Notes from the code", `pipelines/__init__.py`."""
