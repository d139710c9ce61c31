"""One training's held-out scores and gate, to compare two trees of the code exactly.

Trains ``N`` synthetic series of :mod:`benchmarks.training_scale` (seed 7) with the
job's default plan and full set, in this process, twice into one fresh MLflow store
(the second against the first as incumbent, so the gate compares), and writes the
guarded champion's and persistence's held-out scores per series and horizon
(``OUT.csv``) and both gate decisions and the first training's CPU seconds
(``OUT.json``). Run it with each tree on ``PYTHONPATH`` and compare the files:

    PYTHONPATH=TREE python benchmarks/training_heldout.py 60 /tmp/before
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.training_scale import candidates, job_plan, synthetic
from forecaster.tracking import TrackingConfig
from forecaster.training import train


def main() -> None:
    """Train twice, write ``OUT.csv`` and ``OUT.json``."""
    n, out = int(sys.argv[1]), sys.argv[2]
    df, plan = synthetic(n), job_plan()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tracking = TrackingConfig(
            tracking_uri=f"sqlite:///{root}/mlflow.db",
            experiment_name="heldout",
            artifact_location=(root / "a").as_uri(),
        )
        kw = {"tracking": tracking, "model_name": "b", "models_dir": root / "m"}
        load, began = os.getloadavg()[0], time.process_time()
        first = train(df, candidates("full", plan), plan, **kw)  # type: ignore[arg-type]
        cpu = time.process_time() - began
        second = train(df, candidates("full", plan), plan, **kw)  # type: ignore[arg-type]
    s = first.scores
    rows = s[s["model"].isin(["guarded", "persistence"])]
    rows.sort_values(["unique_id", "model", "horizon"]).to_csv(f"{out}.csv", index=False)
    result = {
        "cpu_s_first_training": round(cpu, 1),
        "load_before": round(load, 2),
        "decisions": [o.decision.point.reason for o in (first, second)],
        "promoted": [o.promoted for o in (first, second)],
        "relative": [repr(o.decision.relative) for o in (first, second)],
        "failed": [list(o.decision.failed) for o in (first, second)],
    }
    Path(f"{out}.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
