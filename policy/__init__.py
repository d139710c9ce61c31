"""The scale policy: pure functions from forecast and live signals to a recommendation.

The chain (each step a public function, ``decide`` composes them):
forecast -> :func:`peak_demand` / :func:`nodes_for_gpus` -> :func:`add_latency` ->
:func:`reactive_floor` -> :func:`assess_health` -> :func:`clamp` -> :func:`stabilise`
-> :class:`Recommendation` with its :class:`Explanation`.
"""
