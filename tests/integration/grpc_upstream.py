"""Calling the expander as an upstream cluster-autoscaler release would, from its own process.

The client (``upstream_expander_client.py``) runs apart because upstream's messages
share the package and names of Foresight's own; see its docstring.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.integration.tls_certs import TlsFiles

CLIENT = Path(__file__).with_name("upstream_expander_client.py")
UPSTREAM_PROTO = Path(__file__).with_name("protos") / "expander.proto"


def generate_upstream(out: Path) -> Path:
    """Generate the Python modules of upstream's expander.proto (1.36.1) into ``out``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{UPSTREAM_PROTO.parent}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            str(UPSTREAM_PROTO),
        ],
        check=True,
    )
    return out


def call_upstream(
    port: int, tls: TlsFiles, request: dict[str, Any], *, generated: Path | None, release: str = ""
) -> dict[str, Any]:
    """Send ``request`` from a process of its own, as the release's messages carry it."""
    args = [sys.executable, str(CLIENT), "--port", str(port), "--ca", str(tls.ca_file)]
    args += ["--request", json.dumps(request)]
    args += ["--release", release] if release else ["--generated", str(generated)]
    done = subprocess.run(args, check=True, capture_output=True, text=True, timeout=60)
    result: dict[str, Any] = json.loads(done.stdout)
    return result
