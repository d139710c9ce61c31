"""Foresight's forecasting core: series contract, models, backtests, tracking.

Time series in, forecasts out. No web, no scheduler, no Prometheus here.
"""
