"""The closed-loop twin: the real service run against a simulated cluster, step by step.

:mod:`.cluster` is the simulated node pool (pure); :mod:`.loop` drives the running
``foresight serve`` in lock-step with it over HTTP; :mod:`.case` builds a run from a
trace; :mod:`.compare` puts the twin's figures beside the offline replay's.
"""
