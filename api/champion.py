"""Following the registry's ``@champion``: every replica serves what was promoted (docs/api.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from api.service import RecommendationService
from api.settings import AppSettings
from forecaster.exceptions import TrackingError
from forecaster.registry import LoadedModel, champion_version, check_reachable, load_champion
from pipelines.config.tracking import tracking_config

logger = logging.getLogger(__name__)


def load_model(settings: AppSettings) -> tuple[LoadedModel | None, str]:
    """Load the champion (registry, else last known good); None and why when neither has one."""
    try:
        loaded = load_champion(
            settings.registered_model_name,
            models_dir=settings.models_dir,
            tracking=tracking_config(settings),
        )
    except TrackingError as exc:
        logger.warning("serving reactively: %s", exc)
        return None, str(exc)
    logger.info("serving champion version %s from the %s", loaded.version, loaded.source)
    return loaded, ""


class ChampionSource(Protocol):
    """Where the champion comes from: the MLflow registry, or a test's fake."""

    def champion_version(self) -> str | None:
        """The version ``@champion`` names now; None when there is none.

        Raises:
            TrackingError: the registry cannot be asked.
        """
        ...

    def load(self) -> LoadedModel:
        """Load the champion (falling back to the local copy when the registry fails).

        Raises:
            TrackingError: neither the registry nor a local copy has one.
        """
        ...


@dataclass(frozen=True)
class RegistryView:
    """What a replica last learnt from the registry.

    Attributes:
        champion_version: the version ``@champion`` named at the last check that
            reached the registry (None: no champion, or never reached).
        reachable: whether the last check reached the registry.
        problem: why the last check or load failed; empty when it did not.
    """

    champion_version: str | None
    reachable: bool
    checked_at: datetime
    problem: str = ""

    def differs_from(self, served: str | None) -> bool:
        """Whether the registry's champion (as last seen) is not the version served."""
        return self.champion_version is not None and self.champion_version != served


class RegistryChampion:
    """The champion of a deployment's MLflow registry.

    Args:
        settings: names the registry, the model and the last-known-good directory.
    """

    def __init__(self, settings: AppSettings) -> None:
        self._name = settings.registered_model_name
        self._models_dir = settings.models_dir
        self._tracking = tracking_config(settings)

    def champion_version(self) -> str | None:
        """Ask the registry, failing fast when its server does not answer."""
        check_reachable(self._tracking)
        return champion_version(self._name, tracking=self._tracking)

    def load(self) -> LoadedModel:
        """Load ``@champion``, refreshing the last-known-good copy."""
        return load_champion(self._name, models_dir=self._models_dir, tracking=self._tracking)


class ChampionFollower:
    """Keeps one replica's served model in step with ``@champion``.

    Args:
        clock: wall time, for ``checked_at``.
    """

    def __init__(
        self,
        service: RecommendationService,
        source: ChampionSource,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._service = service
        self._source = source
        self._clock = clock

    def check(self) -> bool:
        """Ask the registry once; load and serve a new champion when there is one.

        Never raises for a registry problem: serving goes on with what it has, and
        :attr:`~api.services.Services.registry` says what went wrong.

        Returns:
            Whether a different model (or the same version from a new source) was
            put in service.
        """
        services = self._service.services
        previous = services.registry
        try:
            version = self._source.champion_version()
        except TrackingError as exc:
            if previous is None or previous.reachable:
                logger.warning("registry unreachable, serving what is loaded: %s", exc)
            last = None if previous is None else previous.champion_version
            services.registry = RegistryView(last, False, self._clock(), str(exc))
            return False
        services.registry = RegistryView(version, True, self._clock())
        served = services.model
        if version is None:
            return False
        if served is not None and served.version == version and served.source == "registry":
            return False
        try:
            loaded = self._source.load()
        except TrackingError as exc:
            logger.warning("could not load champion version %s: %s", version, exc)
            services.registry = RegistryView(version, True, self._clock(), str(exc))
            return False
        if (
            served is not None
            and loaded.version == served.version
            and loaded.source == served.source
        ):
            return False
        was = "nothing" if served is None else f"version {served.version} ({served.source})"
        self._service.use_model(loaded)
        logger.info(
            "now serving champion version %s from the %s (was %s)",
            loaded.version,
            loaded.source,
            was,
        )
        return True
