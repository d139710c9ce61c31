"""Names and aliases shared by the peak-quantile modules."""

from __future__ import annotations

from typing import Final, Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

LEAD: Final = "lead"
"""Column of peak frames: the lead time in steps."""
LAST: Final = "last"
"""Column of peak frames: the target's value at the origin ``ds``."""
SCALE: Final = "scale"
"""Column of peak frames: the series' recent volatility the model worked in."""

Role = Literal["queue", "arrivals", "jobs", "util"]
"""How a covariate signal is turned into features (see ``features.py``)."""

DEFAULT_TARGETS: Final[tuple[str, ...]] = ("demand_gpus",)
DEFAULT_COVARIATES: Final[tuple[tuple[str, Role], ...]] = (
    ("queue_gpus", "queue"),
    ("pending_gpus", "queue"),
    ("arrivals", "arrivals"),
    ("arrivals_pods", "arrivals"),
    ("pending_jobs", "jobs"),
    ("pending_pods", "jobs"),
    ("gpu_util", "util"),
)
"""Signal -> role. A pool's first signal of a role (in this order) fills that role."""
ROLES: Final[tuple[Role, ...]] = ("queue", "arrivals", "jobs", "util")
