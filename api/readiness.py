"""Readiness: a model is loaded, the store answers and takes writes, the live data is fresh.

Details: docs/api.md, "Notes from the code", `api/readiness.py`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from api.champion import RegistryView
from api.service import RecommendationService
from forecaster.loaders import DEMAND
from forecaster.registry import LoadedModel
from forecaster.types import SeriesId
from pipelines.errors import StoreError

Cause = Literal["model_missing", "store_unreachable", "store_not_writable", "data_stale"]
"""Why a replica is not ready, as a code that reveals nothing of the deployment."""


@dataclass(frozen=True)
class Readiness:
    """The verdict: ready or not, the failed checks in words, and every check's details.

    ``causes`` holds one code per entry of ``reasons``, in the same order.
    """

    ready: bool
    reasons: list[str]
    checks: dict[str, dict[str, Any]]
    causes: list[Cause] = field(default_factory=list)

    def redacted(self) -> Readiness:
        """Return the verdict for a caller without a read token: cause codes as the
        reasons and only each check's ``ok``."""
        return Readiness(
            ready=self.ready,
            reasons=list(self.causes),
            checks={name: {"ok": bool(check.get("ok"))} for name, check in self.checks.items()},
            causes=list(self.causes),
        )


def registry_check(view: RegistryView | None, served: LoadedModel | None) -> dict[str, Any]:
    """The model check's view of the registry: its champion and whether it is served.

    A replica that serves an older version than the registry names (the registry was
    down when it started, or a new version is still loading) stays ready: it serves,
    and says which version and why.
    """
    version = None if served is None else served.version
    if view is None:
        return {"served_version": version, "registry": {"checked": False}}
    registry: dict[str, Any] = {
        "checked": True,
        "reachable": view.reachable,
        "checked_at": view.checked_at.isoformat(),
        "champion_version": view.champion_version,
    }
    if view.problem:
        registry["problem"] = view.problem
    return {
        "served_version": version,
        "champion_version": view.champion_version,
        "differs": view.differs_from(version),
        "registry": registry,
    }


def check_readiness(service: RecommendationService) -> Readiness:
    """Check the model, the store (reads, and a write: :mod:`api.store_probe`) and the
    freshness of every pool's live data."""
    services = service.services
    reasons: list[str] = []
    causes: list[Cause] = []
    model = services.model
    if model is None:
        reasons.append(f"no model is loaded: {services.model_problem or 'unknown reason'}")
        causes.append("model_missing")
        model_check: dict[str, Any] = {"ok": False, "problem": services.model_problem}
    else:
        model_check = {"ok": True, "version": model.version, "source": model.source}
        if model.reason:
            model_check["note"] = model.reason
    model_check.update(registry_check(services.registry, model))
    try:
        services.store.samples.last_timestamp(str(SeriesId(service.names[0], DEMAND)))
        store_check: dict[str, Any] = {"ok": True, "url": services.store.url}
    except StoreError as exc:
        reasons.append(f"the store is unreachable: {exc}")
        causes.append("store_unreachable")
        store_check = {"ok": False, "url": services.store.url, "problem": str(exc)}
    written = service.store_probe.check()
    if not written.ok:
        reasons.append(f"the store is not writable: {written.problem}")
        causes.append("store_not_writable")
    write_check = {"ok": written.ok, **({"problem": written.problem} if written.problem else {})}
    now = service.now()
    stale: dict[str, float | None] = {}
    for name in service.names:
        newest = service.live.readings(name).newest
        bound = services.settings.service.live_stale_steps * service.forecasts.step(name)
        # A reading far in the future (written by another writer) is no fresher.
        if newest is None or abs(now - newest) > bound:
            stale[name] = None if newest is None else (now - newest).total_seconds()
    if stale:
        described = ", ".join(f"{name} ({_age(age)})" for name, age in stale.items())
        reasons.append(f"live data is missing or stale for pools: {described}")
        causes.append("data_stale")
    data_check = {"ok": not stale, "now": now.isoformat(), "stale_pools": sorted(stale)}
    return Readiness(
        ready=not reasons,
        reasons=reasons,
        checks={
            "model": model_check,
            "store": store_check,
            "store_write": write_check,
            "data": data_check,
        },
        causes=causes,
    )


def _age(age: float | None) -> str:
    if age is None:
        return "no samples"
    return f"{age:.0f} s old" if age >= 0 else f"{-age:.0f} s in the future"
