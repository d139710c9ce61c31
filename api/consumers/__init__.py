"""Consumers' formats: the priority-expander ConfigMap, capacity buffers and webhooks.

Details: docs/consumers.md, "Notes from the code", `api/consumers/__init__.py`."""
