"""``/dashboard/pool/{pool}`` and ``/dashboard/status``: what the page draws beside the set."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

from fastapi.testclient import TestClient

from api.main import create_app
from api.services import Services
from pipelines.store.store import Store
from policy.types import Calibration
from tests.api.dashboard.conftest import END

END_ISO = "2025-03-30T23:55:00Z"


def _z(text: str) -> str:
    return text.replace("+00:00", "Z")


def test_recommended_nodes_are_the_recorded_history_with_its_changes(
    store: Store, client: TestClient
) -> None:
    # Before the window (in force at its start), then two changes inside it; the
    # repeated 7 is a record of another change (current nodes) and no step.
    for minutes, nodes in ((400, 5), (200, 6), (150, 6), (60, 7), (55, 7)):
        store.recommendations.append("alpha", END - timedelta(minutes=minutes), nodes, "hold", {})

    body = client.get("/dashboard/pool/alpha", params={"hours": 6}).json()

    steps = [(s["nodes"], _z(s["ds"])) for s in body["recommended"]]
    assert steps[:3] == [
        (5, _z(body["since"])),
        (6, "2025-03-30T20:35:00Z"),
        (7, "2025-03-30T22:55:00Z"),
    ]
    events = [e for e in body["events"] if e["kind"] == "recommended"]
    assert [(e["before"], e["after"]) for e in events[:2]] == [(5, 6), (6, 7)]
    # The nodes that existed: each change of the samples is an event too.
    nodes = [p["y"] for p in body["series"]["nodes"]]
    changes = sum(a != b for a, b in pairwise(nodes))
    assert changes > 0
    assert sum(e["kind"] == "nodes" for e in body["events"]) == changes
    assert len(body["series"]["demand_gpus"]) == 6 * 12 + 1


def test_the_band_is_the_served_quantile_calibrated_as_the_decision_uses_it(
    services: Services,
) -> None:
    services.calibration = lambda pool, level: Calibration(
        offset=5.0, live_coverage=0.8, forecasts=50
    )
    with TestClient(create_app(services=services, refresh_seconds=None)) as client:
        band = client.get("/dashboard/pool/alpha").json()["band"]
        raw = client.get("/forecast/alpha").json()

    assert band["level"] == 0.9
    assert band["lo_level"] == 0.5
    assert band["offset"] == 5.0
    stored = [r["q0.9"] for r in raw["records"]]
    assert [p["hi"] for p in band["points"]] == [max(0.0, v + 5.0) for v in stored]
    assert [p["lo"] for p in band["points"]] == [r["q0.5"] for r in raw["records"]]


def test_freshness_live_error_headline_and_terms(services: Services) -> None:
    services.live_error = lambda pool, now: (0.8, END - timedelta(minutes=10))
    with TestClient(create_app(services=services, refresh_seconds=None)) as client:
        body = client.get("/dashboard/pool/alpha").json()
        rec = client.get("/recommendation/alpha").json()

    assert _z(body["newest_sample"]["at"]) == END_ISO
    assert body["newest_sample"]["age_seconds"] == 0
    assert body["live_error"] == {
        "mase": 0.8,
        "bound": 2.0,
        "measured": {"at": "2025-03-30T23:45:00Z", "age_seconds": 600.0},
    }
    headline = body["headline"]
    assert str(rec["desired_nodes"]) in headline
    assert len(headline.split()) <= 15, headline
    rows = {row["term"]: row for row in body["terms"]}
    assert list(rows) == ["forecast", "floor", "latency", "bounds", "stabilisation", "ready nodes"]
    stages = rec["explanation"]["stages"]
    assert rows["forecast"]["nodes"] == stages["forecast_nodes"]
    assert rows["floor"]["nodes"] == stages["floor_nodes"]
    assert rows["bounds"]["nodes"] == stages["bounded"]
    assert rows["ready nodes"]["nodes"] == rec["current_nodes"]
    decisive = [row["term"] for row in body["terms"] if row["decisive"]]
    term = rec["explanation"]["term"]
    assert decisive == (["floor"] if term == "reactive" else [term])


def test_status_names_the_model_its_forecast_run_and_the_jobs(
    services: Services, store: Store
) -> None:
    run = store.job_runs.start("train", runner="host:1")
    store.job_runs.finish(run, "ok", "trained", details={"version": "3", "promoted": True})
    store.leader.claim("host:1")
    app = create_app(services=services, refresh_seconds=None, mlflow_ui="http://127.0.0.1:5055/")
    with TestClient(app) as client:
        body = client.get("/dashboard/status").json()

    model = body["model"]
    assert model["version"] == "3"
    assert model["promoted_at"] is not None
    assert model["mlflow_url"] == "http://127.0.0.1:5055/#/models/foresight-demand/versions/3"
    assert model["forecast_generated"]["at"] is not None
    assert model["forecast_observed_until"]["age_seconds"] is not None
    jobs = {job["name"]: job for job in body["scheduler"]["jobs"]}
    assert {"ingest", "train", "forecast", "evaluate"} <= set(jobs)
    assert jobs["train"]["outcome"] == "ok"
    assert jobs["forecast"]["outcome"] is None  # never ran as a job here
    assert body["scheduler"]["leader"] == "host:1"


def test_status_links_a_tracking_servers_own_ui_without_its_credentials(
    services: Services,
) -> None:
    services.settings = services.settings.model_copy(
        update={"mlflow_tracking_uri": "https://user:secret@mlflow.example:8443/"}
    )
    with TestClient(create_app(services=services, refresh_seconds=None)) as client:
        url = client.get("/dashboard/status").json()["model"]["mlflow_url"]

    assert url.startswith("https://mlflow.example:8443/#/models/")
    assert "secret" not in url


def test_status_has_no_link_without_a_ui(client: TestClient) -> None:
    assert client.get("/dashboard/status").json()["model"]["mlflow_url"] is None
