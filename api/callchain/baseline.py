"""Each service's usual p95 latency: an exponentially weighted moving average over time.

Details: docs/api.md, "Notes from the code", `api/callchain/baseline.py`."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Final

from api.callchain.types import ServiceStats
from forecaster.exceptions import DataValidationError
from policy.types import iso_utc, require_aware

DEFAULT_FORGET_AFTER: Final = timedelta(days=1)
"""A baseline not updated for this long is dropped (its service has gone quiet)."""


@dataclass(frozen=True)
class Baseline:
    """The usual p95 of one service.

    Attributes:
        p95_ms: the moving average of the service's p95 call duration, in ms.
        updated_at: when it last took in a value.
        updates: how many values it has taken in.
    """

    p95_ms: float
    updated_at: datetime
    updates: int = 1

    def __post_init__(self) -> None:
        require_aware(self.updated_at, "Baseline.updated_at")
        if not math.isfinite(self.p95_ms) or self.p95_ms < 0:
            raise DataValidationError(f"baseline p95_ms must be finite and >= 0: {self.p95_ms}")


@dataclass(frozen=True)
class BaselineState:
    """Baselines by service name; the empty state knows nothing yet.

    Attributes:
        services: the usual p95 call duration of each service.
        exclusive: the usual p95 exclusive (self) time of each service.
    """

    services: Mapping[str, Baseline] = field(default_factory=dict)
    exclusive: Mapping[str, Baseline] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "services", MappingProxyType(dict(self.services)))
        object.__setattr__(self, "exclusive", MappingProxyType(dict(self.exclusive)))

    def get(self, service: str) -> Baseline | None:
        """Return the call-duration baseline of ``service``, None when it has none."""
        return self.services.get(service)

    def get_exclusive(self, service: str) -> Baseline | None:
        """Return the exclusive-time baseline of ``service``, None when it has none."""
        return self.exclusive.get(service)

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready form (ISO 8601 UTC timestamps) for the store.

        ``{"p95": {service: entry}, "exclusive": {service: entry}}``, each entry
        ``{p95_ms, updated_at, updates}``.
        """
        return {"p95": _entries(self.services), "exclusive": _entries(self.exclusive)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BaselineState:
        """Rebuild a state written by :meth:`to_dict`.

        Raises:
            DataValidationError: an entry is missing a field or holds a bad value.
        """
        return cls(_parse(data.get("p95") or {}), _parse(data.get("exclusive") or {}))


def _entries(baselines: Mapping[str, Baseline]) -> dict[str, object]:
    return {
        name: {
            "p95_ms": baseline.p95_ms,
            "updated_at": iso_utc(baseline.updated_at),
            "updates": baseline.updates,
        }
        for name, baseline in sorted(baselines.items())
    }


def _parse(data: Mapping[str, Any]) -> dict[str, Baseline]:
    baselines = {}
    for name, entry in data.items():
        try:
            baselines[str(name)] = Baseline(
                p95_ms=float(entry["p95_ms"]),
                updated_at=datetime.fromisoformat(str(entry["updated_at"])),
                updates=int(entry["updates"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataValidationError(f"baseline of {name!r} is invalid: {exc!r}") from exc
    return baselines


def update_baselines(
    state: BaselineState,
    stats: Mapping[str, ServiceStats],
    now: datetime,
    *,
    half_life: timedelta = timedelta(hours=1),
    min_calls: int = 20,
    freeze_above: float = 2.0,
    min_updates: int = 5,
    skip: Collection[str] = (),
    forget_after: timedelta = DEFAULT_FORGET_AFTER,
) -> BaselineState:
    """Fold the window's p95 of every service into its baselines.

    The call-duration and the exclusive-time baselines are updated alike, each frozen
    on its own while its value is past ``freeze_above`` times it.

    Args:
        half_life: after this long, the previous baseline weighs half.
        min_calls: services with fewer calls in the window are not updated (their p95
            is noise).
        freeze_above: a ready baseline is not updated while the service's p95 exceeds
            ``freeze_above`` times it.
        min_updates: a baseline with this many updates is ready (see :func:`is_ready`).
        skip: services not updated from this window (the analysis flagged them).
        forget_after: baselines last updated longer ago than this are dropped.

    Returns:
        The new state; services without stats (or skipped) keep their baseline until
        it is ``forget_after`` old.
    """
    require_aware(now, "now")
    if half_life <= timedelta(0):
        raise ValueError(f"half_life must be positive, got {half_life}")
    forget = now - forget_after
    services = {n: b for n, b in state.services.items() if b.updated_at >= forget}
    exclusive = {n: b for n, b in state.exclusive.items() if b.updated_at >= forget}
    for name, stat in stats.items():
        if stat.call_count < min_calls or name in skip:
            continue
        for into, value in ((services, stat.p95_ms), (exclusive, stat.self_p95_ms)):
            if math.isfinite(value):
                _fold(into, name, value, now, half_life, freeze_above, min_updates)
    return BaselineState(services, exclusive)


def _fold(
    baselines: dict[str, Baseline],
    name: str,
    value: float,
    now: datetime,
    half_life: timedelta,
    freeze_above: float,
    min_updates: int,
) -> None:
    old = baselines.get(name)
    if old is None:
        baselines[name] = Baseline(value, now, 1)
        return
    if is_ready(old, min_updates) and value > freeze_above * old.p95_ms:
        return
    elapsed = max(timedelta(0), now - old.updated_at)
    weight = 1.0 - 0.5 ** (elapsed / half_life)
    baselines[name] = Baseline(old.p95_ms + weight * (value - old.p95_ms), now, old.updates + 1)


def is_ready(baseline: Baseline | None, min_updates: int = 5) -> bool:
    """Return whether a baseline has seen enough windows to judge the service by."""
    return baseline is not None and baseline.updates >= min_updates
