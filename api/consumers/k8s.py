"""Kubernetes object helpers shared by the consumers: names, labels, offline checks, YAML.

Details: docs/consumers.md, "Notes from the code", `api/consumers/k8s.py`."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml
from kubernetes.client import ApiClient  # type: ignore[import-untyped]

from pipelines.errors import PublishError

Manifest = dict[str, Any]
"""A Kubernetes object as a JSON-ready dict (``apiVersion``, ``kind``, ``metadata``...)."""

MANAGED_BY: Final[Mapping[str, str]] = {"app.kubernetes.io/managed-by": "foresight"}
"""The label every object Foresight writes carries, so it can find (and prune) them."""

_LABEL_NAME: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_LABEL_MAX: Final = 63


@dataclass(frozen=True)
class _NameRule:
    """One of the API server's rules for a name: its pattern, its length, its words."""

    pattern: re.Pattern[str]
    max_length: int
    rule: str
    """What the value is not, and how to write it, for the message."""

    def require(self, value: str, what: str) -> str:
        """Return ``value`` if the rule allows it (PublishError naming ``what`` if not)."""
        if len(value) > self.max_length or not self.pattern.fullmatch(value):
            raise PublishError(f"{what} {value!r} is not {self.rule}")
        return value


_DNS_LABEL: Final = _NameRule(
    re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"),
    _DNS_LABEL_MAX,
    "a DNS-1123 label: use at most 63 lowercase letters, digits and '-', starting and "
    "ending with a letter or digit",
)
_DNS_SUBDOMAIN: Final = _NameRule(
    re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"),
    253,
    "a DNS-1123 subdomain: use at most 253 lowercase letters, digits, '-' and '.', "
    "starting and ending with a letter or digit",
)
_LABEL_VALUE: Final = _NameRule(
    _LABEL_NAME,
    _DNS_LABEL_MAX,
    "a valid label value: use at most 63 letters, digits, '-', '_' or '.', starting and "
    "ending with a letter or digit",
)


def require_dns_label(value: str, what: str) -> str:
    """Return ``value`` if it is a DNS-1123 label (namespaces, container names).

    Raises:
        PublishError: it is not; the message names ``what`` and the rule.
    """
    return _DNS_LABEL.require(value, what)


def require_dns_subdomain(value: str, what: str) -> str:
    """Return ``value`` if it is a DNS-1123 subdomain (the names of most objects).

    Raises:
        PublishError: it is not; the message names ``what`` and the rule.
    """
    return _DNS_SUBDOMAIN.require(value, what)


def require_label_key(key: str) -> str:
    """Return ``key`` if it is a qualified label key such as ``foresight.io/pool``.

    Raises:
        PublishError: the optional prefix is not a DNS subdomain or the name part is
            not 1-63 letters, digits, '-', '_' or '.' starting and ending alphanumeric.
    """
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        raise PublishError(f"label key {key!r} has an empty prefix before '/'")
    if prefix:
        require_dns_subdomain(prefix, f"label key prefix of {key!r}")
    if len(name) > _DNS_LABEL_MAX or not _LABEL_NAME.fullmatch(name):
        raise PublishError(
            f"label key {key!r}: the name part must be 1-63 letters, digits, '-', '_' or "
            "'.', starting and ending with a letter or digit"
        )
    return key


def require_label_value(value: str, what: str) -> str:
    """Return ``value`` if it is a valid label value (empty, or a label name part).

    Raises:
        PublishError: it is not.
    """
    return _LABEL_VALUE.require(value, what) if value else value


@dataclass(frozen=True)
class _Response:
    # ApiClient.deserialize reads a response's ``data``: this feeds it a dict offline.
    data: str


def check_typed(*objects: tuple[Manifest, str]) -> None:
    """Check built-in kinds against the official client's typed models, offline.

    Args:
        objects: pairs of an object as a dict and the client's model class name for
            its kind, e.g. ``(deployment, "V1Deployment")``.

    Raises:
        PublishError: a required field is missing, a value has the wrong type, or a
            field is unknown to the model (it does not survive the round trip).
    """
    # One client for the batch: building one costs about a millisecond.
    with ApiClient() as client:
        for manifest, model in objects:
            try:
                typed = client.deserialize(_Response(json.dumps(manifest)), model)
                back = client.sanitize_for_serialization(typed)
            except (ValueError, TypeError, AttributeError) as exc:
                raise PublishError(f"{_describe(manifest)} is not a valid {model}: {exc}") from exc
            if back != manifest:
                where = _first_difference(manifest, back, "")
                raise PublishError(
                    f"{_describe(manifest)} does not match the {model} schema at "
                    f"{where or '<root>'}: a field is unknown, misplaced or of the wrong type"
                )


def _describe(manifest: Manifest) -> str:
    name = manifest.get("metadata", {}).get("name", "<unnamed>")
    return f"{manifest.get('kind', 'object')} {name!r}"


def _first_difference(ours: object, theirs: object, path: str) -> str | None:
    """Return the first path where two JSON values differ, None when they are equal."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs), key=str):
            found = _first_difference(ours.get(key), theirs.get(key), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            found = _first_difference(a, b, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    # bool is an int in Python but not in JSON: True == 1 must not pass.
    if ours != theirs or type(ours) is not type(theirs):
        return path
    return None


class _ManifestDumper(yaml.SafeDumper):
    """Block style with indented lists and multi-line strings as ``|`` literals."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # kubectl-style output indents list items under their key.
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ManifestDumper.add_representer(str, _represent_str)


def load_yaml(text: str) -> Any:
    """Parse YAML safely, with libyaml's parser when PyYAML was built with it.

    Raises:
        yaml.YAMLError: the text is not YAML.
    """
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    # Both loaders build only plain types (no arbitrary Python objects).
    return yaml.load(text, Loader=loader)


def to_yaml(value: object) -> str:
    """Return ``value`` as block YAML, keys in insertion order, lists indented."""
    return yaml.dump(
        value,
        Dumper=_ManifestDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=4096,
    )


def to_yaml_documents(manifests: list[Manifest]) -> str:
    """Return several objects as one multi-document YAML stream (``---`` separated)."""
    return "".join(f"---\n{to_yaml(manifest)}" for manifest in manifests)
