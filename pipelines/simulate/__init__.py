"""Replay a demand trace against scaling policies and account for GPU-hours and waiting.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/__init__.py`."""
