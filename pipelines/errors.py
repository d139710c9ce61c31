"""The deployment's errors: the store, and the consumers' formats.

Both extend :class:`~forecaster.exceptions.ForesightError`, so whatever catches
Foresight's own errors (the CLI, the jobs, the API's handlers) catches these too.
"""

from forecaster.exceptions import ForesightError


class StoreError(ForesightError):
    """The store's database is unreachable, misconfigured or failed a read or write."""


class PublishError(ForesightError):
    """A consumer format (ConfigMap, manifest, webhook) failed validation or delivery."""
