"""``.ci/test-setup``, the set-up step of ``make test``: without root and without the
Debian packages it stops at once and names the one command to run."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "test-setup"
NOBODY = 65534


def _bare_path(tmp_path: Path) -> Path:
    """A PATH with only the shell tools the script uses: no prometheus, no chromium."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "id", "dirname"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    return bin_dir


def test_without_root_it_stops_with_the_install_command() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root (to drop to an unprivileged user with setpriv)")
    # pytest's tmp_path is private to root: the unprivileged user needs its own.
    with tempfile.TemporaryDirectory() as shared:
        Path(shared).chmod(0o755)
        done = _run_as_nobody(_bare_path(Path(shared)))
    assert done.returncode == 1, done.stderr
    assert (
        "sudo apt-get update && sudo apt-get install -y --no-install-recommends "
        "prometheus chromium" in done.stderr
    )


def _run_as_nobody(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "env",
            f"PATH={bin_dir}",
            "bash",
            str(SCRIPT),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_with_the_packages_present_it_installs_nothing(tmp_path: Path) -> None:
    bin_dir = _bare_path(tmp_path)
    for tool in ("prometheus", "promtool", "chromium"):
        fake = bin_dir / tool
        fake.write_text("#!/bin/sh\nexit 0\n")
        fake.chmod(0o755)
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Installing" not in done.stdout
