"""``foresight serve`` as a user runs it: API, scheduler and MLflow UI in one command."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc  # type: ignore[import-untyped]
import httpx
import pytest

from api.grpc_expander.protos import expander_pb2, expander_pb2_grpc
from tests.integration.tls_certs import make_tls

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"
START_TIMEOUT_S = 180.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(url: str, process: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"foresight serve exited early:\n{process.communicate()[0]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"{url} did not answer within {timeout:.0f} s")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, int, dict[str, str]]]:
    api_port, ui_port, expander_port = _free_port(), _free_port(), _free_port()
    tls = make_tls(tmp_path)
    env = {
        **os.environ,
        "FORESIGHT_ROOT": str(tmp_path),
        "FORESIGHT_SAMPLE_DIR": str(SAMPLE),
        "FORESIGHT_POOLS_FILE": str(SAMPLE / "pools.yaml"),
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
        # cluster-autoscaler's gRPC expander beside the API, over TLS.
        "FORESIGHT_PUBLISH__GRPC_EXPANDER_ADDRESS": f"127.0.0.1:{expander_port}",
        "FORESIGHT_PUBLISH__GRPC_EXPANDER_CERT": str(tls.cert_file),
        "FORESIGHT_PUBLISH__GRPC_EXPANDER_KEY": str(tls.key_file),
        "FORESIGHT_TEST_CA": str(tls.ca_file),
    }
    foresight = Path(sys.executable).with_name("foresight")
    process = subprocess.Popen(
        [
            *(str(foresight), "serve", "--clock", "replay"),
            *("--port", str(api_port), "--mlflow-ui-port", str(ui_port)),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process, api_port, ui_port, env
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.timeout(300)
def test_serve_runs_api_scheduler_and_mlflow_ui_and_stops_cleanly(
    served: tuple[subprocess.Popen[str], int, int, dict[str, str]], tmp_path: Path
) -> None:
    process, api_port, ui_port, env = served
    base = f"http://127.0.0.1:{api_port}"
    _wait_for(f"{base}/healthz", process, START_TIMEOUT_S)

    pools = httpx.get(f"{base}/recommendation", timeout=30).json()
    assert {entry["pool"] for entry in pools["pools"]} == {
        "a100-train",
        "h100-train",
        "l4-infer",
    }
    _wait_for(f"http://127.0.0.1:{ui_port}/health", process, START_TIMEOUT_S)

    # The gRPC expander answers with the pool /recommendation ranks first.
    credentials = grpc.ssl_channel_credentials(
        root_certificates=Path(env["FORESIGHT_TEST_CA"]).read_bytes()
    )
    address = env["FORESIGHT_PUBLISH__GRPC_EXPANDER_ADDRESS"].replace("127.0.0.1", "localhost")
    with grpc.secure_channel(address, credentials) as channel:
        answer = expander_pb2_grpc.ExpanderStub(channel).BestOptions(
            expander_pb2.BestOptionsRequest(
                options=[
                    expander_pb2.Option(nodeGroupId="not-a-foresight-group", nodeCount=1),
                    expander_pb2.Option(nodeGroupId="eks-l4-infer-ng-51be6c07", nodeCount=1),
                ]
            ),
            timeout=10,
        )
    assert [o.nodeGroupId for o in answer.options] == ["eks-l4-infer-ng-51be6c07"]

    # The embedded scheduler leads (it is alone) and has stored its jobs.
    foresight = Path(sys.executable).with_name("foresight")
    jobs = subprocess.run(
        [str(foresight), "jobs"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    assert "foresight.ingest" in jobs.stdout
    assert "No scheduler has stored these jobs yet" not in jobs.stdout

    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    for line in ("dashboard:", "recommendations:", "API docs:", "MLflow UI:", "gRPC expander:"):
        assert line in output
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{ui_port}/health", timeout=2)
