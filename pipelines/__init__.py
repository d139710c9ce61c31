"""Getting data and running work on a clock: sources, store, jobs, scheduler, simulator.

The pure scale policy the simulator replays is its own package (:mod:`policy`),
below both the API and this package so each imports it downward.
"""
