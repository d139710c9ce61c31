"""Fixtures shared with the consumer tests: real recommendations with set node counts."""

from tests.api.consumers.conftest import recommend

__all__ = ["recommend"]
