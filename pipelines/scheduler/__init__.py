"""The scheduler: APScheduler jobs on the store's database, run by one leader.

:func:`start_scheduler` joins the leader election and, while this process leads,
runs ingest, train, forecast, evaluate and publish on their schedules, recording
every run in the store (``store.job_runs``). ``foresight scheduler`` runs it in the
foreground and ``foresight jobs`` shows what ran and what is next.
"""
