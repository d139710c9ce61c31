"""The deployment's errors: the store, and the consumers' formats (docs/jobs.md)."""

from forecaster.exceptions import ForesightError


class StoreError(ForesightError):
    """The store's database is unreachable, misconfigured or failed a read or write."""


class PublishError(ForesightError):
    """A consumer format (ConfigMap, manifest, webhook) failed validation or delivery."""
