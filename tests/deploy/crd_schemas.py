"""JSON schemas of the custom resources in deploy/, written from their documented fields.

kubernetes-validate knows only built-in kinds. These schemas cover what deploy/ uses
of each CRD and reject unknown fields, so a misspelt key fails here instead of being
dropped by the API server (Prometheus Operator ``monitoring.coreos.com/v1``
ServiceMonitor and PrometheusRule; KEDA ``keda.sh/v1alpha1`` ScaledObject and
TriggerAuthentication). CapacityBuffers are checked by the project's own validator.
"""

from __future__ import annotations

from typing import Any, Final

Schema = dict[str, Any]

_STR: Final[Schema] = {"type": "string", "minLength": 1}
_DURATION: Final[Schema] = {"type": "string", "pattern": r"^(0|([0-9]+(ms|s|m|h|d|w|y))+)$"}
_STR_MAP: Final[Schema] = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA: Final[Schema] = {
    "type": "object",
    "required": ["name", "namespace"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
        "namespace": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "labels": _STR_MAP,
        "annotations": _STR_MAP,
    },
    "additionalProperties": False,
}


def _object(api_version: str, kind: str, spec: Schema) -> Schema:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": spec,
        },
        "additionalProperties": False,
    }


_SECRET_KEY_REF: Final[Schema] = {
    "type": "object",
    "required": ["name", "key"],
    "properties": {"name": _STR, "key": _STR, "optional": {"type": "boolean"}},
    "additionalProperties": False,
}

SERVICE_MONITOR: Final = _object(
    "monitoring.coreos.com/v1",
    "ServiceMonitor",
    {
        "type": "object",
        "required": ["selector", "endpoints"],
        "properties": {
            "selector": {
                "type": "object",
                "properties": {"matchLabels": _STR_MAP, "matchExpressions": {"type": "array"}},
                "additionalProperties": False,
            },
            "namespaceSelector": {
                "type": "object",
                "properties": {
                    "any": {"type": "boolean"},
                    "matchNames": {"type": "array", "items": _STR},
                },
                "additionalProperties": False,
            },
            "jobLabel": _STR,
            "endpoints": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "port": _STR,
                        "targetPort": {"type": ["string", "integer"]},
                        "path": {"type": "string", "pattern": "^/"},
                        "scheme": {"enum": ["http", "https"]},
                        "interval": _DURATION,
                        "scrapeTimeout": _DURATION,
                        "honorLabels": {"type": "boolean"},
                        "authorization": {
                            "type": "object",
                            "properties": {"type": _STR, "credentials": _SECRET_KEY_REF},
                            "additionalProperties": False,
                        },
                    },
                    "additionalProperties": False,
                },
            },
        },
        "additionalProperties": False,
    },
)

PROMETHEUS_RULE: Final = _object(
    "monitoring.coreos.com/v1",
    "PrometheusRule",
    {
        "type": "object",
        "required": ["groups"],
        "properties": {
            "groups": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["name", "rules"],
                    "properties": {
                        "name": _STR,
                        "interval": _DURATION,
                        "rules": {
                            "type": "array",
                            "minItems": 1,
                            "items": {
                                "type": "object",
                                "required": ["expr"],
                                "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                                "properties": {
                                    "alert": {
                                        "type": "string",
                                        "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
                                    },
                                    "record": _STR,
                                    "expr": _STR,
                                    "for": _DURATION,
                                    "keep_firing_for": _DURATION,
                                    "labels": _STR_MAP,
                                    "annotations": _STR_MAP,
                                },
                                "additionalProperties": False,
                            },
                        },
                    },
                    "additionalProperties": False,
                },
            }
        },
        "additionalProperties": False,
    },
)

SCALED_OBJECT: Final = _object(
    "keda.sh/v1alpha1",
    "ScaledObject",
    {
        "type": "object",
        "required": ["scaleTargetRef", "triggers"],
        "properties": {
            "scaleTargetRef": {
                "type": "object",
                "required": ["name"],
                "properties": {"apiVersion": _STR, "kind": _STR, "name": _STR},
                "additionalProperties": False,
            },
            "minReplicaCount": {"type": "integer", "minimum": 0},
            "maxReplicaCount": {"type": "integer", "minimum": 1},
            "pollingInterval": {"type": "integer", "minimum": 1},
            "cooldownPeriod": {"type": "integer", "minimum": 0},
            "triggers": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["type", "metadata"],
                    "properties": {
                        "type": _STR,
                        "name": _STR,
                        "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                        # KEDA trigger metadata values are all strings.
                        "metadata": _STR_MAP,
                        "authenticationRef": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {"name": _STR, "kind": _STR},
                            "additionalProperties": False,
                        },
                    },
                    "additionalProperties": False,
                },
            },
        },
        "additionalProperties": False,
    },
)

TRIGGER_AUTHENTICATION: Final = _object(
    "keda.sh/v1alpha1",
    "TriggerAuthentication",
    {
        "type": "object",
        "properties": {
            "secretTargetRef": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["parameter", "name", "key"],
                    "properties": {"parameter": _STR, "name": _STR, "key": _STR},
                    "additionalProperties": False,
                },
            }
        },
        "additionalProperties": False,
    },
)

SCHEMAS: Final[dict[tuple[str, str], Schema]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE,
    ("keda.sh/v1alpha1", "ScaledObject"): SCALED_OBJECT,
    ("keda.sh/v1alpha1", "TriggerAuthentication"): TRIGGER_AUTHENTICATION,
}
"""Schema per (apiVersion, kind) of the custom resources deploy/ uses."""
