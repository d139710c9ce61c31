"""Metric sources: Prometheus over HTTP and tidy files, behind one ``fetch`` protocol."""
