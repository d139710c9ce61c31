"""``GET /dashboard/status``: is the machinery behind the numbers alive? (docs/dashboard.md)"""

from __future__ import annotations

from datetime import datetime
from typing import Final
from urllib.parse import quote, urlsplit, urlunsplit

from api.dashboard.pool_view import age
from api.dashboard.schemas import JobOut, ModelOut, SchedulerOut, StatusOut
from api.service import RecommendationService
from api.settings import AppSettings
from pipelines.scheduler.plan import default_plan
from pipelines.scheduler.status import job_statuses
from pipelines.store.store import Store

TRAIN_JOB: Final = "train"
_TRAIN_RUNS_READ: Final = 50


def mlflow_base(settings: AppSettings, ui: str | None) -> str | None:
    """The MLflow UI's address: the one given, else a tracking server's own (it serves a UI).

    A local (SQLite) tracking store has no UI unless ``foresight serve
    --mlflow-ui-port`` starts one and passes its address in. Credentials in a
    tracking URI are never put in a link.
    """
    if ui:
        return ui.rstrip("/")
    uri = settings.mlflow_tracking_uri
    if not uri.startswith(("http://", "https://")):
        return None
    parts = urlsplit(uri)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def model_version_url(base: str | None, model_name: str, version: str | None) -> str | None:
    """The MLflow UI's page of one registered model version; None without UI or version."""
    if base is None or version is None:
        return None
    return f"{base}/#/models/{quote(model_name, safe='')}/versions/{quote(version, safe='')}"


def promoted_at(store: Store, version: str) -> datetime | None:
    """When the train job promoted ``version`` (its run's end), None if no run says so."""
    for run in store.job_runs.history(TRAIN_JOB, limit=_TRAIN_RUNS_READ):
        details = run.details
        if str(details.get("version")) == version and details.get("promoted"):
            return run.finished_at or run.started_at
    return None


def _scheduler(service: RecommendationService, wall_now: datetime) -> SchedulerOut:
    store = service.services.store
    leader = store.leader.current()
    jobs = [
        JobOut(
            name=status.name,
            trigger=status.trigger,
            outcome=None if status.last_run is None else status.last_run.outcome,
            summary="" if status.last_run is None else status.last_run.summary,
            last_run=None if status.last_run is None else status.last_run.started_at,
            next_run=status.next_run,
        )
        for status in job_statuses(store, default_plan(service.services.settings))
    ]
    return SchedulerOut(
        leader=None if leader is None else leader.holder,
        leader_since=None if leader is None else leader.since,
        jobs=jobs,
        wall_now=wall_now,
    )


def deployment_status(service: RecommendationService, mlflow_ui: str | None) -> StatusOut:
    """Return the model, forecast-run and scheduler status of the deployment.

    Raises:
        StoreError: the store failed (503).
    """
    services = service.services
    now = service.now()
    loaded = services.model
    version = None if loaded is None else loaded.version
    run = None if version is None else services.store.forecast_runs.latest(version)
    settings = services.settings
    model = ModelOut(
        version=version,
        source=None if loaded is None else loaded.source,
        promoted_at=None if version is None else promoted_at(services.store, version),
        forecast_generated=age(None if run is None else run.generated_at, now),
        forecast_observed_until=age(None if run is None else run.observed_until, now),
        mlflow_url=model_version_url(
            mlflow_base(settings, mlflow_ui), settings.registered_model_name, version
        ),
    )
    return StatusOut(now=now, model=model, scheduler=_scheduler(service, services.wall_clock()))
