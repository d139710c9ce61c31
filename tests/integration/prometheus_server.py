"""Start a real Prometheus (the Debian package) over a TSDB backfilled with promtool.

Used by ``tests/integration/test_prometheus.py``; ``.ci/run`` installs the package
(``apt-get install -y prometheus``), which puts ``prometheus`` and ``promtool`` in
``/usr/bin``.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pytest

_START_TIMEOUT_S = 30.0
# Month-long blocks: the default 2 h blocks make backfilling a month take ~30 s, not ~0.1 s.
# The flag is hidden from --help in Debian's 2.42 but accepted.
_MAX_BLOCK_DURATION = "--max-block-duration=744h"


@dataclass(frozen=True)
class Binaries:
    """Paths of the two Prometheus executables."""

    prometheus: Path
    promtool: Path


@dataclass(frozen=True)
class Series:
    """One series to backfill: a metric name, its labels and values at ``ts_s``."""

    name: str
    labels: Mapping[str, str]
    values: Sequence[float] | np.ndarray


def require_binaries() -> Binaries:
    """Find ``prometheus`` and ``promtool``; skip the test without them (fail in CI)."""
    found = [shutil.which(name) for name in ("prometheus", "promtool")]
    if found[0] is None or found[1] is None:
        message = (
            "Prometheus is not installed (need prometheus and promtool on PATH; "
            "Debian/Ubuntu: apt-get install -y prometheus)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI must run every integration test")
        pytest.skip(message)
    return Binaries(Path(found[0]), Path(found[1]))


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_openmetrics(path: Path, ts_s: Sequence[int], series: Iterable[Series]) -> int:
    """Write gauges as OpenMetrics text (families grouped, ``# EOF`` last).

    Returns:
        The number of samples written.
    """
    by_family: dict[str, list[Series]] = {}
    for one in series:
        by_family.setdefault(one.name, []).append(one)
    stamps = [str(t) for t in ts_s]
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for name, members in by_family.items():
            out.write(f"# TYPE {name} gauge\n")
            for one in members:
                count += _write_series(out, one, stamps)
        out.write("# EOF\n")
    return count


def _write_series(out: IO[str], one: Series, stamps: Sequence[str]) -> int:
    labels = ",".join(f'{k}="{v}"' for k, v in one.labels.items())
    head = f"{one.name}{{{labels}}} "
    # repr round-trips every float exactly, so the test can compare with ==.
    lines = [f"{head}{_number(v)} {t}\n" for t, v in zip(stamps, one.values, strict=True)]
    out.writelines(lines)
    return len(lines)


def _number(value: float) -> str:
    value = float(value)
    if math.isnan(value):
        return "NaN"
    return repr(value)


def backfill(binaries: Binaries, openmetrics: Path, tsdb: Path) -> float:
    """Create TSDB blocks from an OpenMetrics file; return the seconds it took."""
    tsdb.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    subprocess.run(
        [
            str(binaries.promtool),
            "tsdb",
            "create-blocks-from",
            _MAX_BLOCK_DURATION,
            "--quiet",
            "openmetrics",
            str(openmetrics),
            str(tsdb),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return time.monotonic() - began


class PrometheusServer:
    """A Prometheus process over an existing TSDB directory, on a loopback port."""

    def __init__(
        self, binaries: Binaries, tsdb: Path, port: int | None = None, config: str | None = None
    ) -> None:
        self.binaries = binaries
        self.tsdb = tsdb
        self.config = config or "global: {}\n"  # default: no scrape jobs
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tsdb.parent / f"prometheus-{self.port}.log"

    def start(self) -> PrometheusServer:
        """Start the server and wait until ``/-/ready`` answers 200."""
        config = self.tsdb.parent / "prometheus.yml"
        config.write_text(self.config, encoding="utf-8")
        log = self._log.open("ab")
        self._process = subprocess.Popen(
            [
                str(self.binaries.prometheus),
                f"--config.file={config}",
                f"--storage.tsdb.path={self.tsdb}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                # Backfilled history is weeks old; the default 15 d would drop it.
                "--storage.tsdb.retention.time=20y",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._ready():
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited with {self._process.returncode}; see {self._log}:\n"
                    + self._log.read_text(errors="replace")[-2000:]
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"prometheus not ready after {_START_TIMEOUT_S:.0f} s")
            time.sleep(0.1)
        return self

    def kill(self) -> None:
        """SIGKILL the server, as a crash would."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)

    def stop(self) -> None:
        """Terminate the server gracefully (SIGKILL after 10 s)."""
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False
