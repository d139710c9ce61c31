"""Reproducible measurements; each prints a table and writes JSON under results/."""
