"""schemathesis against the app's own OpenAPI document: no 5xx, answers match the schema.

Every operation gets a bounded, derandomised number of generated requests (positive and
negative data), sent in-process to the ASGI app; schemathesis runs the app's lifespan.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.python.asgi import shutdown_lifespans
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.main import create_app
from api.services import Services

EXAMPLES_PER_OPERATION = 10
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def yaml_stream(ctx: schemathesis.DeserializationContext, response: schemathesis.Response) -> Any:
    """Read a YAML answer as kubectl does: a stream of documents (one is returned bare)."""
    documents = list(yaml.safe_load_all(response.content))
    return documents[0] if len(documents) == 1 else documents


@pytest.fixture
def schema(services: Services) -> Iterator[schemathesis.BaseSchema]:
    schemathesis.deserializer("text/yaml")(yaml_stream)
    app = create_app(services=services, refresh_seconds=None, analysis_seconds=None)
    yield schemathesis.openapi.from_asgi("/openapi.json", app)
    # schemathesis keeps the lifespans it starts until the process ends; end ours with
    # the test, before the store fixture closes the store under it.
    shutdown_lifespans()


@pytest.mark.timeout(120)
def test_no_operation_answers_5xx_or_off_schema(schema: schemathesis.BaseSchema) -> None:
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {"POST /v1/traces", "POST /signals/spans", "GET /metrics"} <= {
        op.label for op in operations
    }
    modes = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    for operation in operations:
        for mode in modes:

            @settings(
                max_examples=EXAMPLES_PER_OPERATION,
                derandomize=True,
                database=None,
                deadline=None,
                # Report the first failure as found: shrinking an HTTP case is slow.
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def check(case: schemathesis.Case) -> None:
                case.call_and_validate(checks=CHECKS)

            try:
                check()
            except Unsatisfiable:
                # An operation without parameters or body has no invalid request.
                if mode is not schemathesis.GenerationMode.NEGATIVE:
                    raise
