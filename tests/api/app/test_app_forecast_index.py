"""``GET /forecast`` alone answers with where each pool's forecast is, not a 404."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_forecast_index_links_every_pools_forecast(client: TestClient) -> None:
    response = client.get("/forecast")
    assert response.status_code == 200
    forecasts = response.json()["forecasts"]
    assert forecasts == {"alpha": "/forecast/alpha", "beta": "/forecast/beta"}
    assert client.get(forecasts["alpha"]).status_code == 200
