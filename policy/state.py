"""What the policy carries between decisions: stabilisation's memory, stored as JSON.

Details: docs/policy.md, "Notes from the code", `policy/state.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from forecaster.exceptions import DataValidationError
from policy.types import iso_utc, require_aware


@dataclass(frozen=True)
class LatencyCause:
    """The part of a desired value that was there only for call-chain latency.

    Attributes:
        nodes: nodes the value would not have had without the latency adjustment, >= 1.
        services: the services whose latency asked for them (may be empty when the
            adjustment did not name them).
        reason: the adjustment's reason when it asked (which service, how slow, against
            what), so a held value still says why. Not compared: the figures in it move
            with every analysis, and only the nodes and services make another cause.
    """

    nodes: int
    services: tuple[str, ...] = ()
    reason: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"LatencyCause.nodes must be >= 1, got {self.nodes}")

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready form for the store."""
        stored: dict[str, object] = {"nodes": self.nodes, "services": list(self.services)}
        if self.reason:
            stored["reason"] = self.reason
        return stored


@dataclass(frozen=True)
class DesiredSpan:
    """A pre-stabilisation desired value and the time it was in force.

    ``end`` is the last moment the value is known to have held: the time of the decision
    that replaced it, or of the latest decision for the newest span. ``latency`` is set
    when part of the value was there only for call-chain latency, so that while
    stabilisation holds the value the explanation can still name that cause.
    """

    nodes: int
    start: datetime
    end: datetime
    latency: LatencyCause | None = None

    def __post_init__(self) -> None:
        require_aware(self.start, "DesiredSpan.start")
        require_aware(self.end, "DesiredSpan.end")


@dataclass(frozen=True)
class StabilisationState:
    """What stabilisation remembers between decisions; passed in and returned out.

    Attributes:
        spans: recent pre-stabilisation desired values, oldest first, each strictly
            larger than every later one (smaller earlier values can never be a window
            maximum again, so they are dropped: the state stays small).
        tracked_since: the first decision of this history; scale-down waits until it is
            a whole window old, since nothing is known about earlier demand.
        last_decision_at: the time of the latest decision.
        last_scale_up_at: the latest decision that asked for more nodes than were ready.
        last_basis: when the forecast of the latest decision was made (None: no
            forecast).
        previous: the state as it was before the decisions at ``last_decision_at``
            from the forecast ``last_basis`` (itself without a ``previous``): a
            decision at the same instant from a newer forecast replaces them all
            instead of being added to them (see :func:`policy.stabilise.record`).
    """

    spans: tuple[DesiredSpan, ...] = ()
    tracked_since: datetime | None = None
    last_decision_at: datetime | None = None
    last_scale_up_at: datetime | None = None
    last_basis: datetime | None = None
    previous: StabilisationState | None = None

    def __post_init__(self) -> None:
        for name in ("tracked_since", "last_decision_at", "last_scale_up_at", "last_basis"):
            value = getattr(self, name)
            if value is not None:
                require_aware(value, f"StabilisationState.{name}")

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready form (ISO 8601 UTC timestamps) for the store."""
        return {
            "spans": [
                {
                    "nodes": s.nodes,
                    "start": iso_utc(s.start),
                    "end": iso_utc(s.end),
                    "latency": None if s.latency is None else s.latency.to_dict(),
                }
                for s in self.spans
            ],
            "tracked_since": iso_utc(self.tracked_since),
            "last_decision_at": iso_utc(self.last_decision_at),
            "last_scale_up_at": iso_utc(self.last_scale_up_at),
            "last_basis": iso_utc(self.last_basis),
            "previous": None if self.previous is None else self.previous.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> StabilisationState:
        """Rebuild a state written by :meth:`to_dict`.

        Raises:
            DataValidationError: a field is missing or malformed.
        """
        try:
            raw_spans = data.get("spans") or []
            if not isinstance(raw_spans, Sequence):
                raise TypeError("spans must be a list")
            spans = tuple(
                DesiredSpan(
                    int(s["nodes"]),
                    _parse_iso(s["start"]),
                    _parse_iso(s["end"]),
                    _parse_cause(s.get("latency")),
                )
                for s in raw_spans
            )
            previous = data.get("previous")
            if previous is not None and not isinstance(previous, Mapping):
                raise TypeError("previous must be an object")
            return cls(
                spans=spans,
                tracked_since=_parse_optional_iso(data.get("tracked_since")),
                last_decision_at=_parse_optional_iso(data.get("last_decision_at")),
                last_scale_up_at=_parse_optional_iso(data.get("last_scale_up_at")),
                last_basis=_parse_optional_iso(data.get("last_basis")),
                # States stored before it was kept have none.
                previous=None if previous is None else cls.from_dict(previous),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataValidationError(f"stored stabilisation state is malformed: {exc}") from exc


def _parse_iso(value: object) -> datetime:
    if not isinstance(value, str):
        raise TypeError(f"expected an ISO 8601 string, got {value!r}")
    parsed = datetime.fromisoformat(value)
    return require_aware(parsed, "stored timestamp")


def _parse_optional_iso(value: object) -> datetime | None:
    return None if value is None else _parse_iso(value)


def _parse_cause(value: object) -> LatencyCause | None:
    # States stored before causes were recorded have no "latency" key: no cause.
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"a span's latency must be an object, got {value!r}")
    services = value.get("services") or []
    if not isinstance(services, Sequence) or isinstance(services, str):
        raise TypeError(f"a span's latency services must be a list, got {services!r}")
    reason = value.get("reason") or ""
    return LatencyCause(int(value["nodes"]), tuple(str(name) for name in services), str(reason))
