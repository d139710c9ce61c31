"""A recommendation's explanation as the dashboard shows it: a headline and a table.

Details: docs/dashboard.md, "Notes from the code", `api/dashboard/explain.py`."""

from __future__ import annotations

from typing import Final

from api.dashboard.schemas import TermRow
from api.schemas import InputReadingOut, PoolRecommendation

_HEALTH: Final = {
    "no_forecast": "no forecast",
    "forecast_short": "forecast too short",
    "stale_forecast": "stale forecast",
    "stale_live": "stale live data",
    "error": "forecast error too high",
}
"""Short words for each reason the forecast is not trusted."""


def _gpus(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} GPUs"


def _value(reading: InputReadingOut | None) -> float | None:
    return None if reading is None else reading.value


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"


def _reason(rec: PoolRecommendation) -> str:
    """The one reason of the headline: the term that set the number, in a few words."""
    ex = rec.explanation
    stages, settings = ex.stages, ex.settings
    if ex.term == "reactive" or ex.mode == "reactive":
        why = ", ".join(_HEALTH.get(r, r) for r in ex.health_reasons) or "forecast not used"
        return f"reactive ({why}), sized for demand now"
    if ex.term == "forecast":
        peak = ex.inputs.get("forecast_peak_gpus")
        lead = settings.get("lead_time_seconds", 0) / 60
        return f"q{rec.quantile:g} demand peak {_gpus(_value(peak))} within {lead:.0f} min"
    if ex.term == "floor":
        demand = ex.inputs.get("live_demand_gpus")
        return f"demand now ({_gpus(_value(demand))}) needs more than forecast"
    if ex.term == "latency":
        services = ", ".join(ex.latency.services) or "a service"
        return f"+{ex.latency.applied_nodes} for slow {services}"
    if ex.term == "bounds":
        if stages.need > stages.bounded or stages.stabilised > stages.final:
            return f"capped at the pool's max of {settings.get('max_nodes', 0):.0f}"
        return f"held at the pool's min of {settings.get('min_nodes', 0):.0f}"
    limit = {
        "window": "scale-down waits out the stabilisation window",
        "step": "scale-down limited to one step",
        "warming_up": "scale-down waits: window still warming up",
    }
    return limit.get(ex.stabilisation_limit or "window", "stabilisation holds nodes")


def headline(rec: PoolRecommendation) -> str:
    """What to do and why, in about a dozen words (e.g. ``Scale up to 14 nodes (+2): ...``)."""
    if rec.action == "scale_up":
        what = f"Scale up to {_nodes(rec.desired_nodes)} (+{rec.delta})"
    elif rec.action == "scale_down":
        what = f"Scale down to {_nodes(rec.desired_nodes)} ({rec.delta})"
    else:
        what = f"Hold at {_nodes(rec.desired_nodes)}"
    return f"{what}: {_reason(rec)}"


def _age(reading: InputReadingOut | None) -> float | None:
    return None if reading is None else reading.age_seconds


def terms(rec: PoolRecommendation) -> list[TermRow]:
    """The explanation's chain as rows: each term's node count, what it used and its age."""
    ex = rec.explanation
    st, s, inputs = ex.stages, ex.settings, ex.inputs
    peak = inputs.get("forecast_peak_gpus")
    demand = inputs.get("live_demand_gpus")
    if ex.mode == "reactive":
        forecast_detail = "not used: " + (ex.health_detail or "forecast not trusted")
    else:
        forecast_detail = f"q{rec.quantile:g} peak {_gpus(_value(peak))}"
    latency = ex.latency
    latency_detail = (
        "not GPU-bound: more GPUs would not help"
        if latency.not_gpu_bound
        else (latency.reason or "no slow service")
    )
    if latency.applied_nodes:
        latency_detail = f"+{latency.applied_nodes}: {latency_detail}"
    limit = ex.stabilisation_limit
    window_min = s.get("scale_down_window_seconds", 0) / 60
    stab_detail = (
        f"scale-down held by the {window_min:.0f} min window (max {st.window_max})"
        if limit
        else "scale-up is immediate; no scale-down pending"
    )
    rows = [
        ("forecast", st.forecast_nodes, forecast_detail, _age(peak)),
        ("floor", st.floor_nodes, f"live demand {_gpus(_value(demand))}", _age(demand)),
        ("latency", st.latency_nodes, latency_detail, None),
        (
            "bounds",
            st.bounded,
            f"min {s.get('min_nodes', 0):.0f}, max {s.get('max_nodes', 0):.0f}",
            None,
        ),
        ("stabilisation", st.stabilised, stab_detail, _age(inputs.get("last_scale_up"))),
    ]
    # Reactive mode sizes for the demand of now: the floor row is the one that decided.
    decisive = "floor" if ex.term == "reactive" else ex.term
    out = [
        TermRow(term=name, nodes=n, detail=d, age_seconds=a, decisive=name == decisive)
        for name, n, d, a in rows
    ]
    ready = inputs.get("ready_nodes")
    out.append(
        TermRow(
            term="ready nodes",
            nodes=rec.current_nodes,
            detail=f"GPU util {_gpus_util(inputs.get('gpu_util'))}",
            age_seconds=_age(ready),
            decisive=False,
        )
    )
    return out


def _gpus_util(reading: InputReadingOut | None) -> str:
    if reading is None or reading.value is None:
        return "n/a"
    return f"{reading.value:.0f} %"
