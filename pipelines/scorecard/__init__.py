"""The shadow scorecard: per pool, what Foresight's plan would have changed.

Details: docs/scorecard.md, "Notes from the code", `pipelines/scorecard/__init__.py`."""
