"""Forecasting model families, all behind the one estimator contract of ``base``."""
