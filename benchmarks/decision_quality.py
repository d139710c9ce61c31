"""Decision quality by replay on real demand traces (``../shared/data`` or any files).

Cases (default): Helios Earth total demand (allocated + queued GPUs), four Earth
virtual clusters, and Alibaba LoRA ``busy_gpus_est`` scaled so its peak is 256 GPUs;
node lead times 5, 10 and 20 minutes; 8 GPUs per node; target utilisation 1.0. With
``--data FILE`` every ``<entity>/demand_gpus`` series of the files is a case, or the
series named with ``--series``: any id of the files, whatever its signal (e.g.
``x/rate_rps``), its values replayed as demand in GPUs; the peak model then forecasts
that signal over the files' pools. A file with no ``*/demand_gpus`` series and no
``--series``, an id the files do not hold, a missing or empty file: the run stops at
once with one line saying what to pass (:mod:`benchmarks.inputs`).

Every case replays, side by side: reactive (cluster-autoscaler, work packed and work
spread), static (the smallest fixed size whose waiting closes 90 % of reactive's gap
to the oracle, in hindsight), the oracle, Foresight and the two references.

- Foresight (default, ``--model peak``): what ``/recommendation`` provisions from. The
  global peak-quantile model ``foresight train`` fits (default parameters) on the
  case's fleet (``decision_fleets.py``), refitted daily on the data seen so far and
  nothing later; its raw quantiles calibrated and combined online exactly as the
  forecast job does before storing them (:mod:`forecaster.peak.online`); each step the
  bound goes through ``policy.decide``. Its quantile is swept from 0.05 to 0.999,
  then past it through the pool's ``safety_margin`` (q0.999 plus 0.5 to 60 times the
  series' volatility), so it reaches as low and as high a cost as the references;
  q0.9, q0.95 and q0.99 also plus 1 to 5 of it; with a ``min_nodes`` floor at the
  prehistory's static sizes (``static-ksd``'s) under a few quantiles and under q0.99
  plus 3 (sizes chosen on the prehistory); and every quantile again with no
  scale-down hold, as the buffers are
  (:mod:`benchmarks.decision_sweep`).
  ``--model champion`` replays the per-horizon champion (the fallback when a version
  has no peak model), ``--model FAMILY`` pins one family of it, for diagnosis.
- References (persistence / seasonal naive + k standard deviations, k swept 0 to 6):
  the same policy chain (target utilisation, reactive floor, bounds, stabilisation),
  differing from Foresight only in the forecast, each ``k`` with the pool's
  scale-down hold and with none (``k2+nohold``); and a static size of the
  prehistory's mean demand + k standard deviations (``static-ksd``).

Held out by family (default): the online layer's constants (ACI's step size, the mix's
sharpness and half-life, the snap to demand, the lowest level held after an idle
spell) are, for each case, the ones ``peak_quantile.py`` chose on the tune windows of
the *other* trace families (:mod:`benchmarks.peak_lofo`, read from its JSON,
``--constants``); a family it did not score (outside ``--data``) gets the constants
chosen on all the shared families. ``--in-sample`` serves the constants chosen on
every family's tune window instead, labelled so. Constants still chosen in-sample long
ago and not re-chosen per family are listed in the output (``not_held_out``).

Comparisons are at equal cost only (:mod:`pipelines.simulate.equal_cost`): every
policy's best gap closed at cost <= 1.02 / 1.05 / 1.10 x the oracle's GPU-hours, and
Foresight's frontier against each other policy's, interpolated at each other's costs.
The verdict is computed from those figures, and so is the lead over the best simple
buffer at caps 1.01-1.5x per case and per family (:mod:`benchmarks.buffer_lead`).

Accounting: the traces' 10-min step (5-min, each value held twice, for the 5-min lead);
unmet demand is carried to the next step (``--accounting no-carry`` drops it after one
step); a node is paid from the step it is asked for, booting included. The first 7
days of each trace are prehistory (learnt from, not replayed); the next 14 are replayed.
``--prehistory-days 22`` replays the days after those instead (on the Earth traces,
May 23-31): a window the benchmark's own figures never see, where a setting may be
chosen before this replay scores it.

Run: ``python benchmarks/decision_quality.py [--quick] [--data FILE] [--series ID]``.
Prints tables, writes ``benchmarks/results/decision_quality.json`` (the figures; each
case's runs, every setting of every policy, in a file of their own under
``decision_quality_runs/`` beside it, which the JSON names) and one frontier PNG per case
and lead under ``benchmarks/results/decision_quality/``. ``--rescore`` recomputes the
figures from a saved file; ``--merge FILE...`` rescores the cases of several (one
case/lead per process, as ``benchmarks/results/decision_quality_heldout/``) into one.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.decision_fleets import CaseFleet, default_fleets, file_fleets  # noqa: E402
from benchmarks.decision_fleets import on_step as fleet_on_step  # noqa: E402
from benchmarks.decision_report import (  # noqa: E402
    minutes,
    report,
    saved_cases,
    score,
)
from benchmarks.decision_sweep import (  # noqa: E402
    KS,
    NO_HOLD_LABEL,
    QUANTILES,
    foresight_settings,
    no_hold,
    prehistory_cost,
    static_sizes,
)
from benchmarks.families import family_of  # noqa: E402
from benchmarks.inputs import (  # noqa: E402
    INPUT_ERRORS,
    add_input_options,
    data_dir,
    input_error,
    keep_series,
    load_files,
    pick_series,
    pool_signal_ids,
)
from benchmarks.peak_lofo import SERVED, Constants  # noqa: E402
from forecaster.contract import validate_series  # noqa: E402
from forecaster.estimator import Estimator  # noqa: E402
from forecaster.exceptions import ConfigError, DataValidationError, SourceError  # noqa: E402
from forecaster.loaders import load_trace  # noqa: E402
from forecaster.loaders.traces import DEMAND  # noqa: E402
from forecaster.peak.calibration import MIN_EXPECTED_MISSES  # noqa: E402
from forecaster.plotting import save_png  # noqa: E402
from forecaster.procedure import TrainedChampion  # noqa: E402
from forecaster.types import DS, UID, Y  # noqa: E402
from pipelines.config.pools import PoolConfig  # noqa: E402
from pipelines.config.settings import Settings, load_settings  # noqa: E402
from pipelines.simulate.champion import champion_forecaster, replay_model  # noqa: E402
from pipelines.simulate.compare import REFERENCES  # noqa: E402
from pipelines.simulate.engine import simulate  # noqa: E402
from pipelines.simulate.foresight import ForesightPolicy  # noqa: E402
from pipelines.simulate.frontier import cost_ratio, gap_closed, plot_frontier  # noqa: E402
from pipelines.simulate.oracle import OraclePolicy  # noqa: E402
from pipelines.simulate.peak import PEAK, ModelCache, PeakReplayForecaster  # noqa: E402
from pipelines.simulate.reactive import ReactivePolicy  # noqa: E402
from pipelines.simulate.reference import reference_policy  # noqa: E402
from pipelines.simulate.replay_forecast import ReplayForecaster  # noqa: E402
from pipelines.simulate.result import (  # noqa: E402
    SimResult,
    accounting,
    accounting_line,
)
from pipelines.simulate.static import StaticPolicy, smallest_static_meeting  # noqa: E402
from policy.config import ScaleDownConfig  # noqa: E402

LEADS_MIN = (5, 10, 20)
CONSTANTS_FROM = ROOT / "benchmarks" / "results" / "peak_quantile.json"
NOT_HELD_OUT = (
    "the peak model's hyperparameters (PeakQuantileForecaster defaults; the Earth VC "
    "fleet's VC_PARAMS) and its features and scale definition, chosen on Earth windows "
    "before #40",
    "ACI's minimum expected misses (MIN_EXPECTED_MISSES = 5, --aci-min-misses)",
    "the online mix's experts (which references it mixes), chosen on every family",
    "ACI's window and the warmup of the online state",
)
"""What the served path still uses as chosen in-sample, not re-chosen per family here."""
VCS = ("vc6YE", "vcvlY", "vcLJZ", "vcpDC")
LORA_PEAK_GPUS = 256.0
GPUS_PER_NODE = 8
PREHISTORY = timedelta(days=7)
REPLAY_SPAN = timedelta(days=14)
STATIC_GAP = 0.9
RESULTS = ROOT / "benchmarks" / "results" / "decision_quality.json"
FIGURES = ROOT / "benchmarks" / "results" / "decision_quality"
REF_LABEL = {"reference": "ref-persistence", "reference-seasonal": "ref-seasonal_naive"}
DEFAULT_CASES: dict[str, str] = {
    "earth_total": f"earth_total/{DEMAND}",
    **{f"earth_vc_{vc}": f"earth_vc_{vc}/{DEMAND}" for vc in VCS},
    "alibaba_lora_x": "alibaba_lora/busy_gpus_est",
}
"""The default cases by name, each with the id of its series in the shared traces."""
QUICK_SPAN = timedelta(days=10)

FitCache = dict[tuple[Any, ...], Estimator]


def default_cases(shared: Path) -> dict[str, pd.Series]:
    """Today's demand series in GPUs, by case name, on their native 10-min step."""
    total = load_trace("helios_earth_total", data_dir=shared, signals={"demand_gpus"})
    vcs = load_trace("helios_earth_vc", data_dir=shared, signals={"demand_gpus"})
    lora = load_trace("alibaba_lora", data_dir=shared, signals={"busy_gpus_est"})
    frame = pd.concat([total, vcs, lora], ignore_index=True)
    cases: dict[str, pd.Series] = {}
    for case, uid in DEFAULT_CASES.items():
        series = as_series(frame, uid, case)
        if case == "alibaba_lora_x":
            series = series * (LORA_PEAK_GPUS / float(series.max()))
        cases[case] = series.clip(lower=0.0)
    return cases


def default_case_names(wanted: Sequence[str] | None) -> list[str]:
    """The default cases ``--series`` names (each by its name or its series id), in order.

    Raises:
        DataValidationError: a name is neither; the message lists the cases and says
            that a series of one's own needs ``--data``.
    """
    if not wanted:
        return list(DEFAULT_CASES)
    by_id = {uid: case for case, uid in DEFAULT_CASES.items()}
    named = set()
    for text in wanted:
        case = text if text in DEFAULT_CASES else by_id.get(text)
        if case is None:
            raise DataValidationError(
                f"--series {text!r} is not a default case ({', '.join(DEFAULT_CASES)}) nor "
                "the series id of one; to run a series of your own pass --data FILE with it"
            )
        named.add(case)
    return [case for case in DEFAULT_CASES if case in named]


def file_cases(raw: pd.DataFrame, ids: list[str]) -> dict[str, pd.Series]:
    """The series ``ids`` of files' frame as cases, named ``<pool>_<signal>``."""
    frame, _ = validate_series(keep_series(raw, ids))
    return {uid.replace("/", "_"): as_series(frame, uid, uid).clip(lower=0.0) for uid in ids}


def read_cases(
    args: argparse.Namespace, *, peak: bool, prehistory: timedelta
) -> tuple[dict[str, pd.Series], dict[str, CaseFleet]]:
    """The cases the options name and, for the peak model, their fleets.

    Everything a user can get wrong is checked here, before any replay.

    Raises:
        DataValidationError: an unknown or malformed series id, no series to run, a
            series too short for the prehistory, or data the contract rejects.
        SourceError: a file is missing, empty or unreadable; no shared traces.
    """
    fleets: dict[str, CaseFleet] = {}
    if args.data:
        raw = load_files(list(args.data))
        ids = pick_series(raw[UID].astype(str).unique(), args.series, signal=DEMAND)
        if peak:
            pool_signal_ids(ids, "the peak model needs (pass --model champion otherwise)")
        cases = file_cases(raw, ids)
        if peak:
            fleets = file_fleets(raw, ids)
    else:
        names = default_case_names(args.series)
        shared = data_dir(args, ROOT)
        if shared is None:
            raise SourceError(
                "no shared traces (../shared/data or --data-dir DIR); pass --data FILE"
            )
        cases = {k: v for k, v in default_cases(shared).items() if k in names}
        if peak:
            fleets = default_fleets(shared, VCS, LORA_PEAK_GPUS)
    if args.quick:
        cases = {k: v[v.index < v.index[0] + QUICK_SPAN] for k, v in list(cases.items())[:2]}
    for name, series in cases.items():
        if series.index[-1] < series.index[0] + prehistory:
            days = (series.index[-1] - series.index[0]) / timedelta(days=1)
            raise DataValidationError(
                f"series {name} spans {days:.1f} days, but the replay learns from the first "
                f"{prehistory / timedelta(days=1):g} (--prehistory-days) and replays what "
                "follows; give a longer series or a smaller --prehistory-days"
            )
    return cases, fleets


def as_series(frame: pd.DataFrame, uid: str, name: str) -> pd.Series:
    """One series of a long frame as a UTC-indexed ``pd.Series``."""
    rows = frame[frame[UID] == uid]
    index = pd.DatetimeIndex(rows[DS])
    index = index.tz_localize("UTC") if index.tz is None else index.tz_convert("UTC")
    return pd.Series(rows[Y].to_numpy(dtype=float), index=index, name=name)


def on_step(series: pd.Series, lead: timedelta) -> pd.Series:
    """The series on the step the lead needs: held values on 5 min for a 5-min lead."""
    step = series.index[1] - series.index[0]
    if lead >= step:
        return series
    fine: pd.Series = series.resample(lead).ffill()
    fine.name = series.name
    return fine


def pool_for(
    name: str, series: pd.Series, lead: timedelta, scale_down: ScaleDownConfig | None = None
) -> PoolConfig:
    """The case's pool: 8 GPUs per node, room for twice the peak, plan for 100 % busy."""
    peak_nodes = math.ceil(float(series.max()) / GPUS_PER_NODE)
    return PoolConfig(
        scale_down=scale_down or ScaleDownConfig(),
        name=name.replace("_", "-").lower()[:63].strip("-") or "pool",
        node_group_id=name,
        gpus_per_node=GPUS_PER_NODE,
        min_nodes=0,
        max_nodes=2 * peak_nodes + 4,
        lead_time=lead,
        target_utilisation=1.0,
    )


def run_case(
    name: str,
    series: pd.Series,
    lead: timedelta,
    *,
    settings: Settings,
    model: str,
    carry: bool,
    cache: FitCache,
    figures: Path,
    fleet: CaseFleet | None = None,
    peak_models: ModelCache | None = None,
    scale_down: ScaleDownConfig | None = None,
    prehistory: timedelta = PREHISTORY,
    aci_min_misses: float = MIN_EXPECTED_MISSES,
    family: str = "",
    constants: Constants = SERVED,
    chosen: str = "in-sample",
) -> dict[str, Any]:
    """Replay every policy on one case at one lead time and return its figures.

    ``constants`` are the online layer's (``chosen`` says how: ``held out`` when picked
    without ``family``, ``in-sample`` otherwise).
    """
    series = on_step(series, lead)
    step = series.index[1] - series.index[0]
    split = series.index[0] + prehistory
    pre = series[series.index < split]
    replay = series[(series.index >= split) & (series.index < split + REPLAY_SPAN)]
    pool = pool_for(name, series, lead, scale_down)

    def sim(policy: Any) -> SimResult:
        return simulate(replay, pool, policy, carry=carry)

    reactive = sim(ReactivePolicy("packed"))
    oracle = sim(OraclePolicy(replay))
    w_r, w_o = reactive.waiting_gpu_hours, oracle.waiting_gpu_hours
    budget = w_o + (1 - STATIC_GAP) * (w_r - w_o)
    static = smallest_static_meeting(replay, pool, max_waiting_gpu_hours=budget, carry=carry)
    runs: list[tuple[str, str, SimResult]] = [
        ("reactive", "packed", reactive),
        ("reactive-spread", "", sim(ReactivePolicy("spread"))),
        ("oracle", "", oracle),
        ("static", f"{static.nodes} nodes", static.result),
    ]
    forecaster: ReplayForecaster
    if fleet is not None:
        peak = PeakReplayForecaster(
            fleet_on_step(fleet.frame, step),
            fleet.target,
            QUANTILES,
            params=fleet.params,
            min_misses=aci_min_misses,
            gamma=constants.gamma,
            eta=constants.eta,
            halflife=constants.halflife,
            snap=constants.snap,
            min_level=constants.min_level,
            models=peak_models,
        )
        forecaster, fit_log = peak, peak.fit_log
    else:
        walk = champion_forecaster(
            settings,
            step,
            family=model,
            retrain_every=timedelta(days=1),
            prehistory=pre,
            cache=cache,
        )
        forecaster, fit_log = walk, walk.fit_log
    statics = {nodes: (k, sim(StaticPolicy(nodes))) for k, nodes in static_sizes(pre, pool).items()}
    # Chosen on the prehistory, never by their cost on the scored window.
    floors = {nodes: prehistory_cost(pre, pool, nodes) for nodes in statics}
    terms: dict[str, dict[str, int]] = {}
    for setting, swept in foresight_settings(pool, margins=fleet is not None, floors=floors):
        policy = ForesightPolicy(swept, forecaster)
        runs.append(("foresight", setting, simulate(replay, swept, policy, carry=carry)))
        terms[setting] = dict(policy.terms)
    for nodes, (k, result) in statics.items():
        runs.append(("static-ksd", f"k{k:g} ({nodes} nodes)", result))
    holds = [(pool, "")] + [(p, NO_HOLD_LABEL) for p in (no_hold(pool),) if p is not None]
    for ref, base in REFERENCES.items():
        for held, label in holds:
            for k in KS:
                buffer = reference_policy(held, base, k, prehistory=pre)
                result = simulate(replay, held, buffer, carry=carry)
                runs.append((REF_LABEL[ref], f"k{k:g}{label}", result))
    rows = [
        {
            "policy": policy,
            "setting": setting,
            "gap_closed": gap_closed(w_r, result.waiting_gpu_hours, w_o),
            "cost_ratio": cost_ratio(result, oracle),
        }
        | result.summary()
        for policy, setting, result in runs
    ]
    case = {
        "case": name,
        "family": family or name,
        "lead_minutes": minutes(lead),
        "step_minutes": minutes(step),
        "accounting": accounting(step, carry=carry),
        "replay_steps": len(replay),
        "replay_start": str(replay.index[0]),
        "replay_end": str(replay.index[-1]),
        "aci_min_misses": aci_min_misses if fleet is not None else None,
        "return_level": True if fleet is not None else None,  # always held, as served
        "online_constants": constants.as_dict() if fleet is not None else None,
        "constants_chosen": chosen if fleet is not None else None,
        "pool": {
            "max_nodes": pool.max_nodes,
            "gpus_per_node": GPUS_PER_NODE,
            "scale_down_window_minutes": minutes(pool.scale_down.window),
            "scale_down_max_step_nodes": pool.scale_down.max_step_nodes,
            "scale_down_max_step_percent": pool.scale_down.max_step_percent,
        },
        "mean_demand_gpus": float(replay.mean()),
        "forecaster": model,
        "fits": fitted_families(fit_log, cache) if fleet is None else peak_fits(fit_log),
        "decision_terms": terms,
        "runs": rows,
    }
    case = score(case)
    case["figure"] = str(plot_case(case, figures, accounting_line(step, carry=carry)))
    return case


def case_constants(
    families: dict[str, str], folds: dict[str, Constants] | None, fallback: Constants
) -> dict[str, tuple[Constants, str]]:
    """Per case, the online constants and how they were chosen.

    Args:
        families: case -> its trace family.
        folds: family -> the constants chosen without it (held out); None: in-sample.
        fallback: the constants for a family no fold left out (one the choice never
            saw, so held out too) and for the in-sample run.
    """
    if folds is None:
        return dict.fromkeys(families, (fallback, "in-sample"))
    return {case: (folds.get(family, fallback), "held out") for case, family in families.items()}


def read_folds(path: Path) -> tuple[dict[str, Constants], Constants]:
    """The per-family held-out constants ``peak_quantile.py`` chose, and its all-family choice.

    Raises:
        SourceError: the file is missing or was not written by a held-out run.
    """
    if not path.is_file():
        raise SourceError(
            f"--constants {path} does not exist; run benchmarks/peak_quantile.py first "
            "(held out by family) or pass --in-sample"
        )
    saved = json.loads(path.read_text())
    if not saved.get("folds"):
        raise SourceError(
            f"--constants {path} holds no per-family folds (an --in-sample run?); run "
            "benchmarks/peak_quantile.py held out, or pass --in-sample"
        )
    folds = {f: Constants(**v["constants"]) for f, v in saved["folds"].items()}
    production = saved.get("production", {}).get("constants")
    return folds, Constants(**production) if production else SERVED


def fitted_families(fit_log: Sequence[pd.Timestamp], cache: FitCache) -> list[dict[str, Any]]:
    """Each refit's last observation and, for the champion, the family it selected."""
    families = {}
    for key, model in cache.items():
        if isinstance(model, TrainedChampion):
            families[pd.Timestamp(key[2])] = sorted(set(model.selection_.values()))
    return [{"at": str(ts), "families": families.get(pd.Timestamp(ts), [])} for ts in fit_log]


def peak_fits(fit_log: Sequence[pd.Timestamp]) -> list[dict[str, Any]]:
    """Each daily fit of the peak forecaster."""
    return [{"at": str(ts), "families": [PEAK]} for ts in sorted(set(fit_log))]


def plot_case(case: dict[str, Any], figures: Path, note: str) -> Path:
    """Every policy on the same axes: cost ratio against gap closed."""
    families: dict[str, list[tuple[float, float]]] = {}
    labels: dict[str, list[str]] = {}
    singles: dict[str, tuple[float, float]] = {}
    for r in case["runs"]:
        point = (r["cost_ratio"], r["gap_closed"])
        if r["policy"] in ("foresight", *REF_LABEL.values()):
            families.setdefault(r["policy"], []).append(point)
            labels.setdefault(r["policy"], []).append(r["setting"])
        else:
            singles[f"{r['policy']} {r['setting']}".strip()] = point
    figure = plot_frontier(
        families,
        singles,
        xlabel="cost ratio (GPU-h provisioned / oracle GPU-h)",
        ylabel="gap closed (reactive packed = 0, oracle = 1)",
        title=f"{case['case']}, lead {case['lead_minutes']} min ({case['forecaster']})\n"
        + textwrap.fill(note, 100),
        labels=labels,
    )
    name = f"{case['case']}_lead{case['lead_minutes']}.png"
    png = save_png(figure, figures / name)
    return png.relative_to(ROOT) if png.is_relative_to(ROOT) else png


def rescored(
    parser: argparse.ArgumentParser,
    console: Console,
    sources: Sequence[Path],
    output: Path,
    leads: Sequence[int],
) -> int:
    """Rescore the saved cases of ``sources`` together and write them to ``output``."""
    missing = [str(p) for p in sources if not p.is_file()]
    if missing:
        parser.error(f"no saved run at {', '.join(missing)}: pass results files it wrote")
    saved = [json.loads(p.read_text()) for p in sources]
    for key in ("mode", "not_held_out"):
        if len({json.dumps(s.get(key)) for s in saved}) > 1:
            parser.error(f"the files differ in {key!r}: only runs made the same way merge")
    cases = [score(c) for p in sources for c in saved_cases(p)]
    seen = [(c["case"], c["lead_minutes"]) for c in cases]
    if len(set(seen)) < len(seen):
        parser.error("a case/lead is in more than one file: pass each once")
    return report(
        console,
        cases,
        sum(s["elapsed_seconds"] for s in saved),
        output,
        leads,
        mode=saved[0].get("mode", ""),
        not_held_out=saved[0].get("not_held_out", ()),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run every case, print the tables, write the JSON and the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 cases, 10 days (smoke run)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--figures", type=Path, default=FIGURES, help="where the PNGs go")
    parser.add_argument(
        "--leads",
        type=lead_minutes,
        default=",".join(str(m) for m in LEADS_MIN),
        help="lead times in minutes, comma-separated",
    )
    parser.add_argument(
        "--model",
        default=PEAK,
        help="Foresight's forecaster: peak (default: what /recommendation serves, the "
        "trained peak model calibrated and combined online), champion (the per-horizon "
        "champion, the fallback) or one family of it pinned (persistence, seasonal_naive, "
        "ets, mstl, gbm)",
    )
    parser.add_argument(
        "--accounting",
        choices=("carry", "no-carry"),
        default="carry",
        help="unmet demand carried to the next step (default) or dropped after one",
    )
    parser.add_argument(
        "--scale-down",
        default=None,
        metavar="WINDOW,MAX_STEP[,PERCENT]",
        help="every policy's scale-down stabilisation, e.g. '0m,1000' for none, '10m,1,0' "
        "for one node per step whatever the pool's size; default the pool default (10m, "
        "1 node or 10 %% of the ready nodes per step, whichever is more)",
    )
    parser.add_argument(
        "--rescore", action="store_true", help="recompute tables from the saved JSON, no replay"
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="rescore the cases of several saved runs (e.g. one case/lead each) together "
        "into --output, no replay; their runs stay in the files they are in",
    )
    parser.add_argument(
        "--prehistory-days",
        type=float,
        default=PREHISTORY.days,
        help="days of each trace learnt from before the replay (default 7; 22 replays a "
        "later window, for choosing settings outside the scored one)",
    )
    parser.add_argument(
        "--aci-min-misses",
        type=float,
        default=MIN_EXPECTED_MISSES,
        help="misses a level must expect over ACI's window to be calibrated (default 5: "
        "not above 0.9826; 0 calibrates every level)",
    )
    parser.add_argument(
        "--in-sample",
        action="store_true",
        help="serve the online constants chosen on every family's tune window (the old "
        "in-sample way, labelled so); default: each family's chosen without it",
    )
    parser.add_argument(
        "--constants",
        type=Path,
        default=CONSTANTS_FROM,
        help="peak_quantile.py's JSON with the per-family held-out constants (default "
        "benchmarks/results/peak_quantile.json)",
    )
    add_input_options(
        parser,
        "cases (default names such as earth_total, or series ids)",
        f"every */{DEMAND} series",
    )
    args = parser.parse_args(argv)
    console = Console(width=220)
    leads: list[int] = args.leads
    if args.rescore or args.merge:
        return rescored(parser, console, args.merge or [args.output], args.output, leads)
    scale_down = None
    if args.scale_down:
        window, _, rest = str(args.scale_down).partition(",")
        step_nodes, _, percent = rest.partition(",")
        try:
            scale_down = ScaleDownConfig(
                window=window,
                max_step_nodes=int(step_nodes or 1),
                max_step_percent=float(percent or ScaleDownConfig().max_step_percent),
            )
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            parser.error(
                f"--scale-down {args.scale_down!r}: {exc}; give WINDOW,MAX_STEP[,PERCENT], "
                "e.g. '10m,1,10'"
            )
    carry = args.accounting == "carry"
    if args.prehistory_days <= 0:
        parser.error(f"--prehistory-days must be positive; got {args.prehistory_days}")
    prehistory = timedelta(days=args.prehistory_days)
    try:
        cases_in, fleets = read_cases(args, peak=args.model == PEAK, prehistory=prehistory)
        folds, production = (None, SERVED) if args.in_sample else read_folds(args.constants)
    except INPUT_ERRORS as exc:
        return input_error(parser.prog, exc)
    families = {
        name: family_of(DEFAULT_CASES[name])
        if name in DEFAULT_CASES and not args.data
        else family_of(fleets[name].target)
        if name in fleets
        else name
        for name in cases_in
    }
    chosen = case_constants(families, folds, production)
    peak_models: dict[tuple[str, pd.Timedelta], ModelCache] = {}
    settings = load_settings(root=ROOT)
    if args.model != PEAK:
        try:  # an unknown family is a mistake to say now, not after the first replays
            for series in cases_in.values():
                replay_model(settings, series.index[1] - series.index[0], args.model)
        except ConfigError as exc:
            return input_error(parser.prog, exc)
    started = time.perf_counter()
    results: list[dict[str, Any]] = []
    for name, series in cases_in.items():
        caches: dict[pd.Timedelta, FitCache] = {}
        for lead_min in leads:
            lead = timedelta(minutes=lead_min)
            stepped = on_step(series, lead)
            step = pd.Timedelta(stepped.index[1] - stepped.index[0])
            results.append(
                run_case(
                    name,
                    series,
                    lead,
                    settings=settings,
                    model=args.model,
                    carry=carry,
                    cache=caches.setdefault(step, {}),
                    figures=args.figures,
                    fleet=fleets.get(name),
                    peak_models=peak_models.setdefault(
                        (fleets[name].name if name in fleets else "", step), {}
                    ),
                    scale_down=scale_down,
                    prehistory=prehistory,
                    aci_min_misses=args.aci_min_misses,
                    family=families[name],
                    constants=chosen[name][0],
                    chosen=chosen[name][1],
                )
            )
            console.print(
                f"{name} lead {lead_min} min done ({time.perf_counter() - started:.0f} s elapsed)"
            )
            # A checkpoint, so a run cut short still leaves what it replayed.
            partial = {"partial": True, "elapsed_seconds": time.perf_counter() - started}
            args.output.parent.mkdir(parents=True, exist_ok=True)
            args.output.write_text(json.dumps(partial | {"cases": results}, default=str))
    return report(
        console,
        results,
        time.perf_counter() - started,
        args.output,
        leads,
        mode=mode_label(args.in_sample, args.constants),
        not_held_out=NOT_HELD_OUT,
    )


def mode_label(in_sample: bool, constants: Path) -> str:
    """How the online constants were chosen, as the output says it."""
    if in_sample:
        return (
            "IN-SAMPLE (--in-sample): the online constants chosen on every family's tune "
            "window, the scored family's included"
        )
    return (
        "held out by family: each case's online constants chosen on the other families' "
        f"tune windows ({constants.name}'s folds)"
    )


def lead_minutes(text: str) -> list[int]:
    """argparse type: comma-separated whole minutes >= 1, else a message saying so."""
    try:
        leads = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        leads = []
    if not leads or min(leads) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not comma-separated whole minutes >= 1, e.g. '5,10,20'"
        )
    return leads


if __name__ == "__main__":
    raise SystemExit(main())
