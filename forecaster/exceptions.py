"""Foresight's own exception hierarchy (docs/forecasting.md)."""


class ForesightError(Exception):
    """Base class of every error Foresight raises on purpose."""


class ConfigError(ForesightError):
    """A settings or pools configuration value is missing or invalid."""


class DataValidationError(ForesightError):
    """A series frame breaks the data contract in a way that cannot be cleaned."""


class InsufficientHistoryError(DataValidationError):
    """A series is too short for the requested model, horizon or backtest."""


class NotFittedError(ForesightError):
    """A model was asked to predict before ``fit`` was called."""


class ModelError(ForesightError):
    """A model failed to fit or predict on a series."""


class UpdateError(ModelError):
    """A fitted series cannot be advanced with new observations; refit it instead."""


class TrackingError(ForesightError):
    """The MLflow tracking server or model registry failed or is unreachable."""


class SourceError(ForesightError):
    """A data file or metric source could not be read."""


class WorkCancelled(BaseException):
    """Work fanned out to an executor was cancelled: the process is stopping.

    A ``BaseException``, like ``KeyboardInterrupt``: code that catches ``Exception`` to
    record a failed window or series and go on must not swallow it, so the run ends
    rather than carrying on with the rest of its work missing.
    """
