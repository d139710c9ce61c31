"""Quantiles of the demand peak over the lead time: the quantity the scale decision needs.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak/__init__.py`."""
