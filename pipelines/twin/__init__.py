"""The closed-loop twin: the real service run against a simulated cluster, step by step.

Details: docs/twin.md, "Notes from the code", `pipelines/twin/__init__.py`."""
