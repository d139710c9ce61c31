"""Pools file: the sample loads, defaults are filled, every error names pool, field, fix."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from forecaster.exceptions import ConfigError
from pipelines.config.pools import PoolConfig, PoolsConfig, parse_duration
from pipelines.config.pools_file import load_pools
from pipelines.config.signals import MAX_SIGNALS_PER_POOL, SIGNALS

SAMPLE_POOLS = Path(__file__).resolve().parents[3] / "data" / "sample" / "pools.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pools.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_pools(path)
    message = str(caught.value)
    assert str(path) in message  # every error names the file
    return message


def test_sample_pools_file_loads_with_defaults_filled() -> None:
    config = load_pools(SAMPLE_POOLS)

    assert config.names == ["a100-train", "h100-train", "l4-infer"]
    h100 = config.get("h100-train")  # sets few fields: the rest are defaults
    assert h100.lead_time == timedelta(minutes=15)
    assert h100.target_utilisation == 0.8
    assert h100.services == []
    assert h100.scale_down.window == timedelta(minutes=10)
    assert h100.scale_down.max_step_nodes == 1
    assert set(h100.signals) == set(SIGNALS)
    assert all(source.promql for source in h100.signals.values())
    l4 = config.get("l4-infer")
    assert l4.lead_time == timedelta(seconds=600)
    assert [(s.name, s.slo_p95_ms) for s in l4.services] == [("embedder", 80), ("generator", 1500)]


def test_minimal_pool_gets_every_documented_default() -> None:
    pool = PoolConfig(name="gpu", node_group_id="asg-gpu")

    assert pool.gpus_per_node == 8
    assert pool.min_nodes == 0
    assert pool.max_nodes == 100
    assert pool.lead_time == timedelta(minutes=10)
    assert pool.cost_per_node_hour == 32.77
    assert pool.target_utilisation == 0.8
    assert pool.quantile == 0.9
    assert set(pool.signals) == {"queue_gpus", "allocated_gpus", "gpu_util", "nodes"}
    assert all(source.column is None for source in pool.signals.values())
    assert pool.services == []
    assert pool.scale_down.window == timedelta(minutes=10)
    assert pool.scale_down.max_step_nodes == 1
    assert pool.scale_down.max_step_percent == 10.0


def test_listing_one_signal_keeps_the_other_defaults() -> None:
    pool = PoolConfig.model_validate(
        {
            "name": "gpu",
            "node_group_id": "asg-gpu",
            "signals": {"gpu_util": {"column": "util"}, "power_watts": {"promql": "sum(p)"}},
        }
    )

    assert set(pool.signals) == {*SIGNALS, "power_watts"}
    assert pool.signals["gpu_util"].column == "util"
    assert pool.signals["gpu_util"].promql is None
    assert pool.promql("gpu_util") is None
    assert pool.promql("power_watts") == "sum(p)"


def test_a_pool_declares_at_most_the_signal_cap() -> None:
    extra = {f"s{i:02d}": {"promql": "x"} for i in range(MAX_SIGNALS_PER_POOL - len(SIGNALS) + 1)}

    with pytest.raises(ValueError, match=f"more than the {MAX_SIGNALS_PER_POOL} a pool may"):
        PoolConfig.model_validate({"name": "gpu", "node_group_id": "asg", "signals": extra})


def test_promql_placeholders_are_filled_per_pool() -> None:
    pool = PoolConfig(name="l4-infer", node_group_id="asg-l4")
    query = pool.promql("gpu_util")

    assert query is not None
    assert 'label_foresight_io_pool="l4-infer"' in query
    assert "$pool" not in query
    assert '"$1"' in query  # label_replace's capture reference is left alone
    assert pool.promql("no_such_signal") is None


def test_series_id() -> None:
    pool = PoolConfig(name="a100", node_group_id="g")
    assert pool.series_id("gpu_util") == "a100/gpu_util"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10m", timedelta(minutes=10)),
        ("15min", timedelta(minutes=15)),
        ("900s", timedelta(seconds=900)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5h", timedelta(minutes=90)),
        (" 2 minutes ", timedelta(minutes=2)),
        ("PT10M", timedelta(minutes=10)),
        ("00:12:00", timedelta(minutes=12)),
        (300, timedelta(minutes=5)),
    ],
)
def test_lead_time_accepts_common_duration_spellings(value: object, expected: timedelta) -> None:
    pool = PoolConfig.model_validate({"name": "p", "node_group_id": "g", "lead_time": value})
    assert pool.lead_time == expected


def test_parse_duration_leaves_other_values_to_pydantic() -> None:
    assert parse_duration("PT10M") == "PT10M"
    assert parse_duration(60) == 60
    assert parse_duration("-5m") == timedelta(minutes=-5)
    with pytest.raises(ValueError, match="unknown unit 'x'"):
        parse_duration("10x")


# Each case: the file, then fragments that must all be in the one error message.
ERROR_CASES = {
    "max below min": (
        "pools:\n  - {name: a100, node_group_id: g, min_nodes: 4, max_nodes: 2}\n",
        ["pool 'a100' field max_nodes: 2 is below min_nodes 4; raise max_nodes or lower min_nodes"],
    ),
    "missing group id": (
        "pools:\n  - {name: a100}\n",
        ["pool 'a100' field node_group_id: required but missing; add", "cluster-autoscaler"],
    ),
    "unnamed pool by index": (
        "pools:\n  - {name: a, node_group_id: g}\n  - {node_group_id: h}\n",
        ["pool #1 field name: required but missing; add a DNS label"],
    ),
    "unknown field": (
        "pools:\n  - {name: a, node_group_id: g, colour: red}\n",
        ["pool 'a' field colour: unknown field; remove it or use one of: name, node_group_id"],
    ),
    "unknown nested field": (
        "pools:\n  - {name: a, node_group_id: g, scale_down: {step: 2}}\n",
        ["pool 'a' field scale_down.step: unknown field", "window, max_step_nodes"],
    ),
    "zero gpus": (
        "pools:\n  - {name: a, node_group_id: g, gpus_per_node: 0}\n",
        ["pool 'a' field gpus_per_node:", "(got 0)", "an integer >= 1"],
    ),
    "utilisation above one": (
        "pools:\n  - {name: a, node_group_id: g, target_utilisation: 1.5}\n",
        ["pool 'a' field target_utilisation:", "(got 1.5)", "in (0, 1]"],
    ),
    "step share above all": (
        "pools:\n  - {name: a, node_group_id: g, scale_down: {max_step_percent: 150}}\n",
        ["pool 'a' field scale_down.max_step_percent:", "(got 150)", "in [0, 100]"],
    ),
    "negative safety margin": (
        "pools:\n  - {name: a, node_group_id: g, safety_margin: -1}\n",
        ["pool 'a' field safety_margin:", "(got -1)", "a finite number >= 0"],
    ),
    "safety margin not a number": (
        "pools:\n  - {name: a, node_group_id: g, safety_margin: lots}\n",
        ["pool 'a' field safety_margin:", "valid number", "(got 'lots')", ">= 0"],
    ),
    "infinite safety margin": (
        "pools:\n  - {name: a, node_group_id: g, safety_margin: .inf}\n",
        ["pool 'a' field safety_margin:", "finite number", "(got inf)"],
    ),
    "boolean safety margin": (
        "pools:\n  - {name: a, node_group_id: g, safety_margin: true}\n",
        ["pool 'a' field safety_margin: safety_margin must be a number, not True"],
    ),
    "bad name": (
        "pools:\n  - {name: A100_Train, node_group_id: g}\n",
        ["pool 'A100_Train' field name:", "a DNS label"],
    ),
    "bad lead time unit": (
        "pools:\n  - {name: a, node_group_id: g, lead_time: 10 parsecs}\n",
        ["pool 'a' field lead_time: unknown unit 'parsecs'", "such as '10m'"],
    ),
    "zero lead time": (
        "pools:\n  - {name: a, node_group_id: g, lead_time: 0s}\n",
        ["pool 'a' field lead_time: lead_time must be positive"],
    ),
    "bad service slo": (
        "pools:\n  - {name: a, node_group_id: g, services: [{name: s, slo_p95_ms: -1}]}\n",
        ["pool 'a' field services.0.slo_p95_ms:", "milliseconds"],
    ),
    "duplicate service": (
        "pools:\n  - {name: a, node_group_id: g, services: "
        "[{name: s, slo_p95_ms: 1}, {name: s, slo_p95_ms: 2}]}\n",
        ["pool 'a' field services: services ['s'] are listed more than once; list each"],
    ),
    "pool not a mapping": (
        "pools:\n  - 5\n",
        ["pool #0:", "write each pool as a mapping with name and node_group_id"],
    ),
    "empty pool list": ("pools: []\n", ["field pools:", "at least one"]),
    "unknown top-level key": (
        "pools:\n  - {name: a, node_group_id: g}\nextra: 1\n",
        ["top level field extra: unknown field; remove it or use one of: pools"],
    ),
}


@pytest.mark.parametrize("case", ERROR_CASES)
def test_errors_name_pool_field_and_fix(tmp_path: Path, case: str) -> None:
    text, fragments = ERROR_CASES[case]
    message = load_error(tmp_path, text)
    for fragment in fragments:
        assert fragment in message


def test_all_problems_are_reported_at_once(tmp_path: Path) -> None:
    message = load_error(
        tmp_path,
        "pools:\n  - {name: a, node_group_id: g, gpus_per_node: 0}\n"
        "  - {name: b, node_group_id: h, quantile: 1}\n",
    )
    assert "2 problem(s)" in message
    assert "pool 'a' field gpus_per_node" in message
    assert "pool 'b' field quantile" in message


def test_duplicate_names_and_group_ids_are_rejected(tmp_path: Path) -> None:
    message = load_error(
        tmp_path,
        "pools:\n  - {name: a, node_group_id: g}\n  - {name: a, node_group_id: g}\n",
    )
    assert "name ['a'] is used by more than one pool" in message
    assert "node_group_id ['g'] is used by more than one pool" in message
    assert "give each pool its own name and node_group_id" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "does not exist"),
        ("pools: [\n", "not valid YAML"),
        ("- name: a\n", "mapping with the key 'pools'"),
        ("", "mapping with the key 'pools'"),
    ],
)
def test_unusable_files_are_config_errors(tmp_path: Path, text: str | None, expected: str) -> None:
    path = tmp_path / "pools.yaml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=expected):
        load_pools(path)


def test_get_unknown_pool_lists_known_ones() -> None:
    config = PoolsConfig(pools=[PoolConfig(name="a", node_group_id="g")])
    with pytest.raises(KeyError, match="known pools: a"):
        config.get("b")


def test_services_outside_pools_are_listed_once(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "pools:\n  - {name: a, node_group_id: g, services: [{name: llm, slo_p95_ms: 500}]}\n"
        "services:\n  - {name: preprocess, slo_p95_ms: 200, baseline_factor: 3}\n"
    )
    loaded = load_pools(good)
    assert [s.name for s in loaded.services] == ["preprocess"]
    assert loaded.services[0].baseline_factor == 3

    message = load_error(
        tmp_path,
        "pools:\n  - {name: a, node_group_id: g, services: [{name: llm, slo_p95_ms: 500}]}\n"
        "services:\n  - {name: llm, slo_p95_ms: 200}\n",
    )
    assert "services ['llm'] are listed more than once" in message


def test_the_newsvendor_quantile_follows_the_cost_ratio() -> None:
    from pipelines.config.pools import NEWSVENDOR_MAX, PoolConfig, newsvendor_quantile

    base = {"name": "a100", "node_group_id": "a100-asg"}
    assert PoolConfig.model_validate(base | {"waiting_cost_ratio": 4}).quantile == 0.8
    assert PoolConfig.model_validate(base | {"waiting_cost_ratio": "1"}).quantile == 0.5
    assert PoolConfig.model_validate(base | {"waiting_cost_ratio": 1e6}).quantile == NEWSVENDOR_MAX
    assert PoolConfig.model_validate(base).quantile_rule == "quantile"
    with pytest.raises(ValueError, match="> 0"):
        newsvendor_quantile(0.0)
    with pytest.raises(ValueError, match="waiting_cost_ratio"):
        PoolConfig.model_validate(base | {"waiting_cost_ratio": -2})


def test_the_safety_margin_defaults_to_none_and_takes_a_number(tmp_path: Path) -> None:
    plain = PoolConfig(name="a", node_group_id="g")
    assert plain.safety_margin == 0.0
    path = write(tmp_path, "pools:\n  - {name: a, node_group_id: g, safety_margin: 2.5}\n")
    assert load_pools(path).get("a").safety_margin == 2.5
