"""Getting data and running work on a clock: sources, store, jobs, scheduler, simulator.

It also holds the pure scale policy (:mod:`pipelines.policy`), below both the API and
the simulator so each imports it downward.
"""
