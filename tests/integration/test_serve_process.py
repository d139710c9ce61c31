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
    # The MLflow UI runs without MLflow's job runner and its consumers: 2 processes.
    ui_processes = [cmd for cmd in _descendants(process.pid) if "mlflow" in cmd]
    assert len(ui_processes) == 2, ui_processes

    # The gRPC expander answers; without a cluster to read the operator's hand-made
    # priority tiers from, it has no opinion and keeps every option (docs/consumers.md).
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
    assert [o.nodeGroupId for o in answer.options] == [
        "not-a-foresight-group",
        "eks-l4-infer-ng-51be6c07",
    ]

    # The embedded scheduler leads (it is alone) and has stored its jobs.
    foresight = Path(sys.executable).with_name("foresight")
    jobs = subprocess.run(
        [str(foresight), "jobs"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    assert any(line.startswith("│ ingest ") for line in jobs.stdout.splitlines())
    assert "No scheduler has stored these jobs yet" not in jobs.stdout

    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    for line in ("dashboard:", "recommendations:", "API docs:", "MLflow UI:", "gRPC expander:"):
        assert line in output
    # The banner links straight to the training runs (not MLflow's GenAI overview).
    assert f"http://127.0.0.1:{ui_port}/#/experiments/" in output
    assert "/runs?workflowType=machine_learning" in output
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{ui_port}/health", timeout=2)


def _descendants(pid: int) -> list[str]:
    """The command lines of every process below ``pid`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    commands: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        child = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(child)
        commands[child] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    found, queue = [], list(children.get(pid, []))
    while queue:
        current = queue.pop()
        found.append(commands.get(current, ""))
        queue.extend(children.get(current, []))
    return found


@pytest.mark.timeout(120)
@pytest.mark.parametrize("taken", ["api", "mlflow-ui"])
def test_a_taken_port_fails_at_once_naming_it(tmp_path: Path, taken: str) -> None:
    api_port, ui_port = _free_port(), _free_port()
    busy = api_port if taken == "api" else ui_port
    env = {
        **os.environ,
        "FORESIGHT_ROOT": str(tmp_path),
        "FORESIGHT_SAMPLE_DIR": str(SAMPLE),
        "FORESIGHT_POOLS_FILE": str(SAMPLE / "pools.yaml"),
    }
    foresight = Path(sys.executable).with_name("foresight")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", busy))
        holder.listen()
        done = subprocess.run(
            [
                *(str(foresight), "serve", "--clock", "replay"),
                *("--port", str(api_port), "--mlflow-ui-port", str(ui_port)),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"port {busy} on 127.0.0.1 is taken" in " ".join(done.stdout.split())
    assert "Foresight is serving" not in done.stdout


@pytest.mark.timeout(300)
def test_sigterm_stops_serve_and_the_mlflow_ui_with_it(
    served: tuple[subprocess.Popen[str], int, int, dict[str, str]],
) -> None:
    process, api_port, ui_port, _ = served
    _wait_for(f"http://127.0.0.1:{api_port}/healthz", process, START_TIMEOUT_S)
    _wait_for(f"http://127.0.0.1:{ui_port}/health", process, START_TIMEOUT_S)
    ui = [cmd for cmd in _descendants(process.pid) if "mlflow" in cmd]
    assert ui, "the MLflow UI should run beside the API"

    process.send_signal(signal.SIGTERM)  # what Kubernetes and systemd send
    output, _ = process.communicate(timeout=60)

    assert process.returncode == 0, output
    # uvicorn re-raised SIGTERM after its shutdown, which ended serve before it stopped
    # the UI: the UI kept running, orphaned, on its port.
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{ui_port}/health", timeout=2)
