"""The last publication's result per object, at scrape time: ``foresight_publish_*``.

Details: docs/consumers.md, "Notes from the code", `api/publish_metrics.py`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily

from api.publish_results import counts
from api.service import RecommendationService
from api.store_metrics import StoreCollector
from pipelines.store.job_runs import JobRun

JOB = "publish"


class PublishCollector(StoreCollector[JobRun | None]):
    """Reads the latest publish run from the app's store at each scrape.

    Args:
        service: returns the app's service, None while it is not started.
    """

    what = "publish runs"

    def _read(self, service: RecommendationService) -> JobRun | None:
        return service.services.store.job_runs.latest().get(JOB)

    def _gauges(self, run: JobRun | None) -> Iterator[GaugeMetricFamily]:
        """Yield the gauges; nothing before the first publish run finished."""
        if run is None or run.finished_at is None:
            return
        objects = run.details.get("objects")
        results = (
            {str(k): str(v) for k, v in objects.items()} if isinstance(objects, Mapping) else {}
        )
        per_object = GaugeMetricFamily(
            "foresight_publish_object_result",
            "1 for each object's result in the last publish run (skipped/failed need a look).",
            labels=["object", "result"],
        )
        for target, result in sorted(results.items()):
            per_object.add_metric([target, result], 1.0)
        tally = GaugeMetricFamily(
            "foresight_publish_objects",
            "Objects of the last publish run by result.",
            labels=["result"],
        )
        for result, count in counts(results).items():
            tally.add_metric([result], count)
        finished = GaugeMetricFamily(
            "foresight_publish_last_run_timestamp_seconds",
            "When the last publish run finished, by its outcome.",
            labels=["outcome"],
        )
        finished.add_metric([run.outcome], run.finished_at.timestamp())
        yield from (per_object, tally, finished)
