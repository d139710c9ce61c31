"""Decisions and serving: the scale policy, call-chain analysis, consumers' formats, the app.

``api.policy`` turns a demand forecast, live signals and forecast health into one
explained recommendation per pool with pure functions (the clock is a parameter).
"""
