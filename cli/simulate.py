"""``foresight simulate``: replay a pool's demand against scaling policies (docs/simulate.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer

from cli.support import ConfigOption, DataOption, cli_errors, cli_settings
from forecaster.exceptions import ConfigError

DEFAULT_SWEEP = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99)
"""Quantiles swept: low ones too, so Foresight reaches as low a cost as the references."""
DEFAULT_KS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
"""Reference margins (standard deviations) swept."""
POLICY_NAMES = (
    "reactive",
    "reactive-spread",
    "static",
    "foresight",
    "oracle",
    "reference",
    "reference-seasonal",
)
"""``pipelines.simulate.compare.POLICY_NAMES``, here so a wrong name is refused at once
(a test keeps the two equal)."""
CHAMPION = "champion"
"""``pipelines.simulate.champion.CHAMPION``: the default ``--model``."""
_NUMBER = re.compile(r"^[+-]?\d+(\.\d*)?$")


@dataclass(frozen=True)
class SimulateArgs:
    """The options of one ``foresight simulate``, checked."""

    pool: str
    data: Path | None
    series: str | None
    lead: timedelta | None
    policies: list[str]
    quantile: float | None
    sweep: bool
    levels: list[float]
    model: str
    carry: bool
    accounting_mode: str
    retrain: timedelta
    retrain_text: str
    warmup: timedelta
    span: timedelta | None
    output_dir: Path | None
    mlflow: bool


def simulate_command(
    pool: Annotated[
        str,
        typer.Option(
            "--pool",
            help="Pool name from the pools file (its demand is <pool>/demand_gpus); any "
            "other name replays <pool>/demand_gpus of the data with default pool settings.",
        ),
    ],
    config: ConfigOption = None,
    data: DataOption = None,
    series: Annotated[
        str | None,
        typer.Option("--series", help="Demand series id to replay; default <pool>/demand_gpus."),
    ] = None,
    lead: Annotated[
        str | None, typer.Option("--lead", help="Node lead time, e.g. 10min; default the pool's.")
    ] = None,
    policies: Annotated[
        str,
        typer.Option("--policies", help=f"Comma-separated, from: {', '.join(POLICY_NAMES)}."),
    ] = "reactive,static,foresight,oracle",
    quantile: Annotated[
        float | None,
        typer.Option(
            "--quantile", min=0.0, max=1.0, help="Foresight's quantile; default the pool's."
        ),
    ] = None,
    sweep: Annotated[
        bool,
        typer.Option(
            "--sweep",
            help="Sweep Foresight's quantile and the references' margin k; compare them at "
            "equal cost; frontier PNG (adds reactive and the oracle, the comparison's ends).",
        ),
    ] = False,
    sweep_levels: Annotated[
        str | None,
        typer.Option(
            "--sweep-levels", help="Quantiles swept, comma-separated; default 0.05..0.99."
        ),
    ] = None,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="Foresight's forecaster: champion (what `foresight train` builds from the "
            "settings' model set), peak (lead-time peak quantiles from a global model of "
            "every series of the data, docs/simulate.md) or one family pinned: "
            "persistence, seasonal_naive, ets, mstl, gbm.",
        ),
    ] = CHAMPION,
    accounting_mode: Annotated[
        str,
        typer.Option(
            "--accounting",
            help="carry: unmet demand waits for the next step (default); no-carry: it is "
            "counted as waiting for its step and dropped, as many simulators do.",
        ),
    ] = "carry",
    retrain: Annotated[
        str, typer.Option("--retrain", help="How often Foresight's forecaster is refitted.")
    ] = "1d",
    warmup: Annotated[
        str,
        typer.Option(
            "--warmup", help="History learnt from before the replay starts (not replayed)."
        ),
    ] = "7d",
    span: Annotated[
        str | None,
        typer.Option("--span", help="Replay at most this long after the warm-up, e.g. 3d."),
    ] = None,
    output_dir: Annotated[
        Path | None,
        typer.Option(
            "--output-dir",
            help="Where the JSON and PNG files go; default <data_dir>/simulate (data/simulate).",
        ),
    ] = None,
    mlflow: Annotated[
        bool, typer.Option("--mlflow", help="Log metrics and plots to the tracking URI.")
    ] = False,
) -> None:
    """Replay a pool's demand against reactive, static, Foresight and oracle policies."""
    with cli_errors():
        chosen = [p.strip() for p in policies.split(",") if p.strip()]
        unknown = sorted(set(chosen) - set(POLICY_NAMES))
        if unknown:
            raise ConfigError(f"unknown policies {unknown}; choose from {', '.join(POLICY_NAMES)}")
        if sweep:
            chosen = [*dict.fromkeys([*chosen, "reactive", "oracle", "foresight"])]
        if quantile is not None and not 0 < quantile < 1:
            raise ConfigError(f"--quantile must be in (0, 1), got {quantile}")
        args = SimulateArgs(
            pool=pool,
            data=data,
            series=series,
            lead=None if lead is None else duration(lead, "--lead"),
            policies=chosen,
            quantile=quantile,
            sweep=sweep,
            levels=_levels(sweep_levels) if sweep else [],
            model=model,
            carry=_carry(accounting_mode),
            accounting_mode=accounting_mode,
            retrain=duration(retrain, "--retrain"),
            retrain_text=retrain,
            warmup=duration(warmup, "--warmup", allow_zero=True),
            span=None if span is None else duration(span, "--span"),
            output_dir=output_dir,
            mlflow=mlflow,
        )
        settings = cli_settings(config)
        from cli.simulate_run import run_simulation

        run_simulation(settings, args)


def duration(text: str, option: str, *, allow_zero: bool = False) -> timedelta:
    """Parse a duration option (``10min``, ``1h30m``, ``PT10M``) or say what to pass.

    Raises:
        ConfigError: no unit, not a duration, or not positive (zero only if allowed).
    """
    from pydantic import TypeAdapter, ValidationError

    from policy.config import parse_duration

    if _NUMBER.fullmatch(text.strip()):
        raise ConfigError(f"{option} {text!r} needs a unit: e.g. {text.strip()}min, 1h, 1d")
    try:
        value = TypeAdapter(timedelta).validate_python(parse_duration(text))
    except (ValueError, ValidationError) as exc:
        raise ConfigError(f"{option} {text!r} is not a duration; use e.g. 10min, 1h, 1d") from exc
    if value < timedelta(0) or (value == timedelta(0) and not allow_zero):
        raise ConfigError(f"{option} must be positive, got {text!r}")
    return value


def _levels(text: str | None) -> list[float]:
    if text is None:
        return list(DEFAULT_SWEEP)
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise ConfigError(f"--sweep-levels {text!r}: give numbers such as 0.8,0.9,0.95") from exc


def _carry(mode: str) -> bool:
    if mode in ("carry", "no-carry"):
        return mode == "carry"
    raise ConfigError(f"--accounting {mode!r} is unknown; use carry or no-carry")
