"""Hooks for the whole test session."""

from __future__ import annotations

import gc

import pytest


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Keep the interpreter's shutdown from tearing down the session's heap object by object.

    By now pytest has printed its summary and collected the garbage it reports on
    (its unraisable-exception check runs before this hook). What is left is
    CPython's own shutdown: it clears the ~5000 imported modules (MLflow, pandas,
    schemathesis...) and runs full garbage collections over everything they held,
    which took 2.2 s of CPU for the imports alone and kept ``make test`` alive ~63 s
    after pytest's summary on a loaded 2-core machine (issue #38). Frozen objects are
    skipped by those collections; atexit handlers and ordinary finalizers still run,
    and the operating system reclaims the memory.
    """
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the process pools the tests left open, and their worker processes.

    A kept pool outlives its job (``make_executor(keep=...)``) and a dropped one (a
    worker killed by a test) is shut down without waiting; ``concurrent.futures`` joins
    their manager threads at exit, and CI runs' pytest waited there for good after
    printing its summary (:func:`pipelines.executors.stop_local_pools`).
    """
    from pipelines.executors import stop_local_pools

    stop_local_pools()
