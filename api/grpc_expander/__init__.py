"""cluster-autoscaler's gRPC expander (``BestOptions``), served from the live ranking.

The protocol (``protos/expander.proto``) is written from cluster-autoscaler's own
definition; the generated modules beside it are committed.
"""
