"""The dashboard page, its assets and its history route, through the app."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.dashboard.page import ASSETS, render_page
from api.dashboard.router import MAX_HISTORY_HOURS
from api.main import create_app
from api.services import Services
from api.settings import ServiceSettings

END_ISO = "2025-03-30T23:55:00Z"


class _Links(HTMLParser):
    """Collects hrefs, script srcs, pool sections and the embedded config."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.scripts: list[str] = []
        self.pools: list[str] = []
        self._in_config = False
        self.config_text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in {"a", "link"} and found.get("href"):
            self.hrefs.append(str(found["href"]))
        if tag == "script":
            if found.get("src"):
                self.scripts.append(str(found["src"]))
            self._in_config = found.get("id") == "foresight-config"
        if tag == "section" and found.get("data-pool"):
            self.pools.append(str(found["data-pool"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_config = False

    def handle_data(self, data: str) -> None:
        if self._in_config:
            self.config_text += data


def parse(page: str) -> _Links:
    parser = _Links()
    parser.feed(page)
    return parser


def test_page_lists_every_pool_and_links_json_routes(client: TestClient) -> None:
    response = client.get("/")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = parse(response.text)
    assert page.pools == ["alpha", "beta"]
    for href in ("recommendation", "pools", "readyz", "docs"):
        assert href in page.hrefs
    config = json.loads(page.config_text)
    assert config["pool_names"] == ["alpha", "beta"]
    assert config["bottlenecks"] == "signals/chain"  # the app's call-chain route
    # Every link and route of the page resolves against the page's URL ("/").
    local = [href for href in page.hrefs if not href.startswith("data:")]
    for path in [*local, *page.scripts, config["recommendation"], config["pools"]]:
        assert client.get(f"/{path}").status_code == 200, path
    assert client.get(f"/{config['forecast']}alpha").status_code == 200
    assert client.get(f"/{config['history']}beta").status_code == 200
    assert client.get(f"/{config['pool_view']}beta").status_code == 200
    assert client.get(f"/{config['status']}").status_code == 200


def test_assets_are_served_from_an_allow_list(client: TestClient) -> None:
    script = client.get("/dashboard/static/common.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "getJSON" in script.text
    assert client.get("/dashboard/static/dashboard.css").text.startswith(":root")
    assert client.get("/dashboard/static/index.html").status_code == 404
    assert client.get("/dashboard/static/..%2F__init__.py").status_code == 404
    assert set(ASSETS) == {
        *(f"{name}.js" for name in ("common", "chart", "status", "chain", "dashboard")),
        *("dashboard.css", "scorecard.js", "scorecard.css"),
    }


def test_the_script_reads_only_the_configured_routes() -> None:
    """No CDN and no hard-coded absolute URL: the page must work offline behind a prefix."""
    from api.dashboard.page import asset_text

    scripts = [name for name in ASSETS if name.endswith(".js")]
    for name in scripts:
        script = asset_text(name)
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", script), name
    # Only the two readers fetch, and each only the URL it is given.
    assert [name for name in scripts if "fetch(" in asset_text(name)] == [
        "common.js",
        "scorecard.js",
    ]
    assert all("fetch(url" in asset_text(name) for name in ("common.js", "scorecard.js"))


def test_history_returns_demand_and_nodes_up_to_now(client: TestClient) -> None:
    body = client.get("/dashboard/history/alpha", params={"hours": 2}).json()

    assert body["pool"] == "alpha"
    assert body["until"].replace("+00:00", "Z") == END_ISO
    assert body["gpus_per_node"] == 8
    demand = body["series"]["demand_gpus"]
    nodes = body["series"]["nodes"]
    # 2 h of 5-min samples, both ends included.
    assert len(demand) == len(nodes) == 25
    assert demand[-1]["ds"].replace("+00:00", "Z") == END_ISO
    assert [p["ds"] for p in demand] == sorted(p["ds"] for p in demand)
    assert all(p["y"] >= 0 for p in demand)


def test_history_of_beta_uses_its_own_node_size(client: TestClient) -> None:
    assert client.get("/dashboard/history/beta").json()["gpus_per_node"] == 4


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/dashboard/history/nope", 404),
        ("/dashboard/history/alpha?hours=0", 422),
        (f"/dashboard/history/alpha?hours={MAX_HISTORY_HOURS + 1}", 422),
    ],
)
def test_history_rejects_bad_requests(client: TestClient, path: str, code: int) -> None:
    assert client.get(path).status_code == code


def test_render_escapes_names_and_script_end() -> None:
    page = render_page(["a<b", "</script>"], bottlenecks_url="callchain/bottlenecks")
    assert "a&lt;b" in page
    assert "</script><" not in page.split('id="foresight-config"')[1].split("</script>")[0]
    config = json.loads(page.split('type="application/json">')[1].split("</script>")[0])
    assert config["pool_names"] == ["a<b", "</script>"]
    assert config["bottlenecks"] == "callchain/bottlenecks"


def test_page_links_the_call_chain_route(client: TestClient) -> None:
    config = json.loads(parse(client.get("/").text).config_text)
    assert config["bottlenecks"] == "signals/chain"
    chain = client.get(f"/{config['bottlenecks']}").json()
    assert {"services", "edges", "bottlenecks"} <= set(chain)


def test_history_window_is_bounded_by_hours(client: TestClient) -> None:
    body = client.get("/dashboard/history/alpha", params={"hours": 0.5}).json()
    assert (
        len(body["series"]["demand_gpus"]) == int(timedelta(minutes=30) / timedelta(minutes=5)) + 1
    )


def test_page_opens_without_a_token_but_data_needs_one(services: Services) -> None:
    """A browser cannot send a bearer token on navigation: the shell is open, data is not."""
    guarded = replace(
        services,
        settings=services.settings.model_copy(
            update={"service": ServiceSettings(read_tokens=(SecretStr("r-token"),))}
        ),
    )
    with TestClient(create_app(services=guarded, refresh_seconds=None)) as client:
        assert client.get("/").status_code == 200
        assert client.get("/dashboard/static/dashboard.js").status_code == 200
        assert client.get("/dashboard/history/alpha").status_code == 401
        authorised = {"Authorization": "Bearer r-token"}
        assert client.get("/dashboard/history/alpha", headers=authorised).status_code == 200
