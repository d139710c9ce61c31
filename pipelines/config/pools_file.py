"""The pools file: read a YAML file of node pools, and say what is wrong with it (docs/jobs.md)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from forecaster.exceptions import ConfigError
from pipelines.config.pools import PoolConfig, PoolsConfig, ServiceConfig, SignalSource
from policy.config import ScaleDownConfig

logger = logging.getLogger(__name__)


def load_pools(path: Path) -> PoolsConfig:
    """Read and validate a pools YAML file.

    Args:
        path: the YAML file, a mapping with the key ``pools``.

    Returns:
        The validated pools with every default filled in.

    Raises:
        ConfigError: the file is missing, not YAML, or a pool is invalid; each problem
            names the file, the pool (by name, or by position when unnamed), the field
            and the fix.
    """
    if not path.is_file():
        raise ConfigError(
            f"pools file {path} does not exist; create it (see data/sample/pools.yaml) "
            "or point FORESIGHT_POOLS_FILE at it"
        )
    try:
        content = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"pools file {path} is not valid YAML: {exc}") from exc
    if not isinstance(content, Mapping) or "pools" not in content:
        raise ConfigError(
            f"pools file {path} must be a mapping with the key 'pools' holding a list of pools"
        )
    try:
        pools = PoolsConfig.model_validate(content)
    except ValidationError as exc:
        problems = [_describe(error, content) for error in exc.errors()]
        raise ConfigError(
            f"pools file {path} has {len(problems)} problem(s):\n  " + "\n  ".join(problems)
        ) from exc
    for name, problem in pools.node_group_warnings().items():
        logger.warning("pools file %s: pool %s: node_group_id %s", path, name, problem)
    return pools


def _describe(error: Any, content: Mapping[str, Any]) -> str:
    """Turn one pydantic error into 'pool <who> field <what>: <problem>; <fix>'."""
    loc: tuple[int | str, ...] = tuple(error["loc"])
    ctx = error.get("ctx") or {}
    if error["type"] == "duplicate_pool":
        return f"pools: {error['msg']}"
    if len(loc) >= 2 and loc[0] == "pools" and isinstance(loc[1], int):
        where, path = _pool_label(content.get("pools"), loc[1]), loc[2:]
        if "field" in ctx:
            path = (*path, ctx["field"])
        if not path:
            return (
                f"{where}: {error['msg']}; write each pool as a mapping with name and node_group_id"
            )
        owner = _model_at(path[:-1])
    else:
        where, path, owner = "top level", loc, PoolsConfig
    field = ".".join(str(part) for part in path)
    if error["type"] == "extra_forbidden":
        known = ", ".join(owner.model_fields) if owner is not None else "see the docs"
        return f"{where} field {field}: unknown field; remove it or use one of: {known}"
    if error["type"].startswith(("pool_", "duplicate_")):
        return f"{where} field {field}: {error['msg']}"
    info = owner.model_fields.get(str(path[-1])) if owner is not None and path else None
    expected = info.description if info is not None and info.description else "a valid value"
    if error["type"] == "missing":
        return f"{where} field {field}: required but missing; add {expected}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where} field {field}: {message} (got {error.get('input')!r}); use {expected}"


def _pool_label(pools: Any, index: int) -> str:
    entry = pools[index] if isinstance(pools, Sequence) and index < len(pools) else None
    if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
        return f"pool {entry['name']!r}"
    return f"pool #{index}"


def _model_at(path: Sequence[int | str]) -> type[BaseModel] | None:
    """Return the model owning the fields at ``path`` inside one pool (None if unknown)."""
    if not path:
        return PoolConfig
    head, rest = path[0], path[1:]
    if head == "signals" and len(rest) == 1:
        return SignalSource
    if head == "services" and len(rest) == 1:
        return ServiceConfig
    if head == "scale_down" and not rest:
        return ScaleDownConfig
    return None
