"""The one typed settings object of a Foresight deployment (docs/jobs.md)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Final, Literal, TypeVar, overload

import yaml
from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    YamlConfigSettingsSource,
)

from forecaster.exceptions import ConfigError
from forecaster.types import DEFAULT_LEVELS
from pipelines.config.sections import PrometheusSettings, SchedulerSettings

ENV_PREFIX: Final = "FORESIGHT_"
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

_SQLITE_PREFIX: Final = "sqlite:///"
_SECRET_FIELDS: Final = frozenset(
    {"webhook_secret", "bearer_token", "password", "read_tokens", "write_tokens"}
)
_PATH_FIELDS: Final = ("data_dir", "sample_dir", "models_dir", "pools_file", "mlflow_artifacts_dir")

# The YAML file of the settings being built. pydantic-settings builds its sources in a
# classmethod that receives no per-call arguments; a context variable scoped to one
# ``load_settings`` call carries the path there without a global or a dynamic subclass
# (which would not pickle into worker processes).
_CONFIG_FILE: ContextVar[Path | None] = ContextVar("foresight_config_file", default=None)


class Settings(BaseSettings):
    """Every tunable of the forecaster and the pipelines, validated once at start-up.

    The API adds its own groups in a subclass (:class:`api.settings.AppSettings`), which
    is what a deployment's settings file is loaded as: this class alone refuses them as
    unknown. Build either with :func:`load_settings`; relative paths are resolved
    against ``root``.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        validate_default=True,
    )

    root: Path = Field(
        default_factory=Path.cwd,
        description="the directory relative paths are resolved against (default: the working "
        "directory)",
    )
    data_dir: Path = Field(
        default=Path("data"), description="the directory of the local store and the sample data"
    )
    sample_dir: Path = Field(
        default=Path("data/sample"), description="the directory of the committed sample data set"
    )
    models_dir: Path = Field(
        default=Path("models"),
        description="the directory of the local MLflow store and last-known-good champions",
    )
    pools_file: Path = Field(
        default=Path("data/sample/pools.yaml"),
        description="the YAML file that lists the node pools",
    )
    mlflow_tracking_uri: str = Field(
        default="sqlite:///models/mlflow.db",
        description="an MLflow tracking and registry URI (default: a SQLite file in models_dir)",
    )
    mlflow_artifacts_dir: Path = Field(
        default=Path("models/mlartifacts"),
        description="the MLflow artifact root directory (default: models_dir/mlartifacts)",
    )
    experiment_name: str = Field(
        default="foresight",
        min_length=1,
        description="a non-empty MLflow experiment name for this deployment",
    )
    registered_model_name: str = Field(
        default="foresight-demand",
        min_length=1,
        description="a non-empty MLflow registered model name; its @champion serves forecasts",
    )
    store_url: str = Field(
        default="sqlite:///data/foresight.db",
        description="a SQLAlchemy URL of the store (default: a SQLite file in data_dir)",
    )
    levels: tuple[float, ...] = Field(
        default=DEFAULT_LEVELS,
        min_length=1,
        description="a list of quantile levels every forecast carries, each strictly between "
        "0 and 1, e.g. [0.5, 0.9]",
    )
    horizon: int = Field(default=36, gt=0, description="a positive number of forecast steps")
    backtest_windows: int = Field(
        default=8,
        gt=1,
        description="a number (>= 2) of rolling-origin backtest cutoffs per training run, "
        "selection and held-out windows together",
    )
    heldout_windows: int = Field(
        default=3,
        gt=0,
        description="how many of the backtest_windows (the latest) are held out: selection "
        "never sees them; the champion's reported scores and the promotion gate use them "
        "only; fewer than backtest_windows",
    )
    model_set: Literal["full", "fast"] = Field(
        default="full",
        description="which candidate families training backtests: 'full' (persistence, "
        "seasonal naive, ETS, MSTL, gradient boosting) or 'fast' (the first three; about "
        "an order of magnitude cheaper per series, for large fleets)",
    )
    champion_rule: Literal["median", "guarded", "select"] = Field(
        default="guarded",
        description="how the champion forecasts each series: 'median' of every candidate "
        "family's forecast (robust: one family far off cannot drag it away), 'guarded' "
        "(persistence, unless a family's own out-of-sample calibration errors beat it by "
        "10 %) or 'select' (the one family, or a combination, that scored best on the "
        "selection windows)",
    )
    horizons: tuple[str, ...] = Field(
        default=("10min", "1h", "3h"),
        min_length=1,
        description="a list of labelled horizons backtest scores are reported at, e.g. "
        "['10min', '1h']; each must fit within horizon steps",
    )
    selection_horizon: str = Field(
        default="1h",
        description="the horizon label (one of horizons) models are selected and gated on; "
        "about a node's lead time plus a step",
    )
    max_gap_steps: int = Field(
        default=48,
        ge=0,
        description="a number of missing steps a gap may span and still be interpolated; "
        "history before a longer gap is dropped (48 = 4 h at 5 min: rides out a short outage)",
    )
    max_train_days: int = Field(
        default=28,
        gt=0,
        description="a positive number of days of history a training run uses at most",
    )
    log_level: LogLevel = Field(
        default="INFO", description="a logging level: DEBUG, INFO, WARNING, ERROR or CRITICAL"
    )
    webhook_secret: SecretStr | None = Field(
        default=None, description="the HMAC-SHA256 key that signs webhook bodies (unset: unsigned)"
    )
    prometheus: PrometheusSettings = Field(
        default_factory=PrometheusSettings, description="the Prometheus source"
    )
    scheduler: SchedulerSettings = Field(
        default_factory=SchedulerSettings, description="the scheduled jobs"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Order the sources: overrides, environment, YAML file, secret files."""
        yaml_settings = YamlConfigSettingsSource(settings_cls, yaml_file=_CONFIG_FILE.get())
        return (init_settings, env_settings, dotenv_settings, yaml_settings, file_secret_settings)

    @model_validator(mode="before")
    @classmethod
    def _derive_defaults(cls, data: Any) -> Any:
        """Derive the MLflow and store locations from the directories actually set."""
        if not isinstance(data, dict):
            return data
        models_dir = data.get("models_dir", cls.model_fields["models_dir"].default)
        data_dir = data.get("data_dir", cls.model_fields["data_dir"].default)
        derived = {
            "mlflow_tracking_uri": f"{_SQLITE_PREFIX}{Path(models_dir) / 'mlflow.db'}",
            "mlflow_artifacts_dir": Path(models_dir) / "mlartifacts",
            "store_url": f"{_SQLITE_PREFIX}{Path(data_dir) / 'foresight.db'}",
        }
        return {**derived, **data}

    @field_validator("root")
    @classmethod
    def _absolute_root(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator(*_PATH_FIELDS)
    @classmethod
    def _resolve_path(cls, value: Path, info: ValidationInfo) -> Path:
        root = info.data.get("root")
        value = value.expanduser()
        if value.is_absolute() or not isinstance(root, Path):
            return value
        return root / value

    @field_validator("mlflow_tracking_uri", "store_url")
    @classmethod
    def _resolve_sqlite_url(cls, value: str, info: ValidationInfo) -> str:
        # A relative SQLite URL would depend on the working directory of whichever
        # process opens it (API, scheduler, CLI); pin it to root like every other path.
        root = info.data.get("root")
        if not value.startswith(_SQLITE_PREFIX) or not isinstance(root, Path):
            return value
        path = value.removeprefix(_SQLITE_PREFIX)
        if path in ("", ":memory:") or path.startswith("/"):
            return value
        return f"{_SQLITE_PREFIX}{root / path}"

    @field_validator("levels")
    @classmethod
    def _check_levels(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        bad = [level for level in value if not 0.0 < level < 1.0]
        if bad:
            raise ValueError(f"levels {bad} are outside (0, 1)")
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _check_heldout_windows(self) -> Settings:
        if self.heldout_windows >= self.backtest_windows:
            raise ValueError(
                f"heldout_windows ({self.heldout_windows}) must be fewer than backtest_windows "
                f"({self.backtest_windows}): selection needs windows of its own"
            )
        return self

    @model_validator(mode="after")
    def _check_selection_horizon(self) -> Settings:
        if self.selection_horizon not in self.horizons:
            raise ValueError(
                f"selection_horizon {self.selection_horizon!r} is not one of horizons "
                f"{list(self.horizons)}; pick one of them or add it to horizons"
            )
        return self

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_log_level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


SettingsT = TypeVar("SettingsT", bound=Settings)


@overload
def load_settings(
    config_file: Path | None = None, *, settings_class: type[SettingsT], **overrides: Any
) -> SettingsT: ...


@overload
def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings: ...


def load_settings(
    config_file: Path | None = None,
    *,
    settings_class: type[Settings] = Settings,
    **overrides: Any,
) -> Settings:
    """Build the settings from overrides, ``FORESIGHT_*`` variables, a YAML file, defaults.

    Args:
        config_file: optional YAML file of settings (a mapping of field names to
            values); environment variables override it.
        settings_class: the class to build: :class:`Settings` (the pipelines' own
            groups) or a subclass adding groups (the API's
            :class:`api.settings.AppSettings`, which loads a deployment's file).
        **overrides: field values that beat every other source (tests, CLI options).

    Raises:
        ConfigError: the config file is missing or malformed, or a value is invalid;
            the message names the field and how to fix it.
    """
    if config_file is not None:
        _check_config_file(config_file)
    with _config_file(config_file):
        try:
            return settings_class(**overrides)
        except ValidationError as exc:
            raise ConfigError(_format_errors(exc, config_file, settings_class)) from exc
        except SettingsError as exc:
            # Raised by the environment source, e.g. a list field that is not JSON.
            raise ConfigError(
                f"invalid settings: {exc}; complex values in FORESIGHT_* variables must be "
                'JSON, e.g. FORESIGHT_LEVELS="[0.5, 0.9]"'
            ) from exc


@contextmanager
def _config_file(path: Path | None) -> Iterator[None]:
    token = _CONFIG_FILE.set(path)
    try:
        yield
    finally:
        _CONFIG_FILE.reset(token)


def _check_config_file(path: Path) -> None:
    """Fail early and clearly where pydantic-settings would skip or choke on the file."""
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; pass an existing YAML file")
    try:
        content = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
    if content is not None and not isinstance(content, Mapping):
        raise ConfigError(
            f"config file {path} must hold a mapping of setting names to values, "
            f"got {type(content).__name__}"
        )


def _format_errors(
    exc: ValidationError, config_file: Path | None, settings_class: type[Settings]
) -> str:
    known = ", ".join(settings_class.model_fields)
    source = f" (config file {config_file})" if config_file is not None else ""
    lines = [f"invalid settings{source}:"]
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "settings"
        if error["type"] == "extra_forbidden":
            lines.append(f"  unknown setting {field!r}; remove it or use one of: {known}")
            continue
        names = [str(part) for part in error["loc"] if isinstance(part, str)]
        if not names:  # a rule across several settings: its message names them
            lines.append(f"  {_message(error)}")
            continue
        expected = _description(settings_class, names) or "a valid value"
        # Never echo a secret back into logs.
        got = "***" if _SECRET_FIELDS.intersection(names) else repr(error.get("input"))
        env_name = ENV_PREFIX + "__".join(names).upper()
        lines.append(
            f"  setting {field}: {_message(error)} (got {got}); set "
            f"{env_name} or {field!r} in the config file to {expected}"
        )
    return "\n".join(lines)


def _description(settings_class: type[Settings], names: list[str]) -> str | None:
    """The description of the (possibly nested) field ``names`` points at."""
    model: Any = settings_class
    description = None
    for name in names:
        fields = getattr(model, "model_fields", None)
        info = fields.get(name) if isinstance(fields, dict) else None
        if info is None:
            break
        description = info.description
        model = info.annotation
    return description


def _message(error: Any) -> str:
    # pydantic prefixes messages of ValueErrors raised in validators; ours read better bare.
    return str(error["msg"]).removeprefix("Value error, ")
