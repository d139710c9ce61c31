"""The training benchmark counts the CPU of processes it did not reap (the pool's)."""

from __future__ import annotations

import subprocess
import sys
import time

from benchmarks.training_scale import descendants_cpu_seconds


def test_a_live_grandchilds_cpu_is_counted() -> None:
    # A child that starts a grandchild burning CPU, as the forkserver starts the workers.
    burn = (
        "import time\nt = time.process_time()\n"
        "while time.process_time() - t < 0.5: pass\ntime.sleep(5)"
    )
    spawn = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burn!r}])"
    child = subprocess.Popen([sys.executable, "-c", spawn])
    try:
        deadline = time.monotonic() + 20
        while descendants_cpu_seconds() < 0.5 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert descendants_cpu_seconds() >= 0.5
    finally:
        child.kill()
        child.wait()
