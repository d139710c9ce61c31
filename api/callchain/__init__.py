"""Call-chain latency signals: trace ingestion, a sliding window of spans, bottlenecks.

Details: docs/api.md, "Notes from the code", `api/callchain/__init__.py`."""
