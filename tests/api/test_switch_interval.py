"""The serving process's GIL switch interval comes from the service settings."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from api.server import use_switch_interval
from api.settings import ServiceSettings


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_the_default_is_shorter_than_pythons() -> None:
    use_switch_interval(ServiceSettings())

    assert sys.getswitchinterval() == pytest.approx(0.001)


def test_the_setting_is_in_milliseconds() -> None:
    use_switch_interval(ServiceSettings(gil_switch_ms=0.5))

    assert sys.getswitchinterval() == pytest.approx(0.0005)


@pytest.mark.parametrize("value", [0, -1, 1000])
def test_an_interval_that_would_stall_or_starve_is_refused(value: float) -> None:
    with pytest.raises(ValidationError, match="gil_switch_ms"):
        ServiceSettings(gil_switch_ms=value)
