"""The series data contract: validate and clean a long frame once, at the edge.

Details: docs/forecasting.md, "Notes from the code", `forecaster/contract/__init__.py`."""

from forecaster.contract.report import CleaningReport, CleaningWarning
from forecaster.contract.validate import validate_series

__all__ = ["CleaningReport", "CleaningWarning", "validate_series"]
