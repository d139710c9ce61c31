"""Decisions and serving: call-chain analysis, consumers' formats, the app.

The app decides with the pure scale policy of :mod:`policy` (below it, so the
simulator replays the very same chain) and adds what only a server knows: the live
signals, the call-chain latency and the stabilisation state in the store.
"""
