"""The shadow scorecard: per pool, what Foresight's plan would have changed.

Against the nodes that actually existed and the demand that came, over the last day
and week: the waiting GPU-hours the plan would have avoided and the node-hours it
would have added. :func:`pipelines.scorecard.compute.score` is the pure core (the
definitions are in its module docstring); :func:`pipelines.scorecard.load.pool_scorecard`
reads the store for it. It lives in ``pipelines`` so the API and the CLI both import
it downward.

Only the value types are exported here: they need nothing but the standard library,
so the CLI can validate ``--window`` before pandas and the store are imported.
"""
