"""The scale policy: pure functions from forecast and live signals to a recommendation.

Details: docs/policy.md, "Notes from the code", `policy/__init__.py`."""
