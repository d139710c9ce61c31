"""The alert rules against a real Prometheus scraping the running service (#13 item 5).

Prometheus scrapes ``/metrics`` of the app (uvicorn, served as ``foresight serve``
configures it) with the example rules loaded. Every metric a rule references must be
in the scrape, and a live forecast error above the bound, as the evaluate job
records it, must put ``ForesightModelDegraded`` into the pending state for that pool.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import yaml

from api.main import create_app
from api.server import server_config
from pipelines.jobs.evaluate import JOB, LIVE_MASE, MODEL_VERSION_KEY
from tests.integration.dashboard_app import sample_services
from tests.integration.prometheus_server import PrometheusServer, free_port, require_binaries

RULES = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "prometheus-rules.yaml"
DEGRADED_POOL = "a100-train"


def _rules_file(path: Path) -> list[dict[str, Any]]:
    (document,) = [d for d in yaml.safe_load_all(RULES.read_text()) if d]
    groups = document["spec"]["groups"]
    path.write_text(yaml.safe_dump({"groups": groups}))
    return [rule for group in groups for rule in group["rules"]]


@pytest.fixture
def service_port(tmp_path: Path) -> Iterator[int]:
    services = sample_services(tmp_path / "app")
    at = datetime.now(UTC)
    run = services.store.job_runs.start(JOB, runner="test", started_at=at)
    services.store.job_runs.finish(
        run,
        "ok",
        "scored",
        finished_at=at,
        details={LIVE_MASE: {f"{DEGRADED_POOL}/demand_gpus": 3.0}, MODEL_VERSION_KEY: "1"},
    )
    port = free_port()
    app = create_app(services=services, refresh_seconds=None, analysis_seconds=None)
    config = server_config(app, services.settings.service, host="127.0.0.1", port=port)
    config.log_level = "warning"
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "uvicorn exited at start"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def _query(url: str, expr: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _eventually(url: str, expr: str, timeout: float = 40.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        found = _query(url, expr)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


@pytest.mark.timeout(180)
def test_alerts_fire_on_metrics_prometheus_scrapes(service_port: int, tmp_path: Path) -> None:
    binaries = require_binaries()
    rules = _rules_file(tmp_path / "rules.yaml")
    config = yaml.safe_dump(
        {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp_path / "rules.yaml")],
            "scrape_configs": [
                {
                    "job_name": "foresight",
                    "metrics_path": "/metrics",
                    "static_configs": [{"targets": [f"127.0.0.1:{service_port}"]}],
                }
            ],
        }
    )
    prometheus = PrometheusServer(binaries, tmp_path / "tsdb", config=config).start()
    try:
        up = _eventually(prometheus.url, 'up{job="foresight"} == 1')
        assert up, "Prometheus never scraped the service"
        used = {name for r in rules for name in re.findall(r"\bforesight_[a-z_]+", r["expr"])}
        missing = sorted(
            name for name in used if not _eventually(prometheus.url, f"count({name})", 10)
        )
        error = _query(prometheus.url, "foresight_live_forecast_error")
        pending = _eventually(
            prometheus.url, 'ALERTS{alertname="ForesightModelDegraded", alertstate="pending"}'
        )
    finally:
        prometheus.stop()

    assert used, "the rules reference no foresight metric"
    assert missing == [], f"alert rules reference metrics the scrape lacks: {missing}"
    assert [(s["metric"]["pool"], float(s["value"][1])) for s in error] == [(DEGRADED_POOL, 3.0)]
    assert [s["metric"]["pool"] for s in pending] == [DEGRADED_POOL]
