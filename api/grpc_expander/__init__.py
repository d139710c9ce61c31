"""cluster-autoscaler's gRPC expander (``BestOptions``), served from the live ranking.

Details: docs/consumers.md, "Notes from the code", `api/grpc_expander/__init__.py`."""
