"""The Dockerfile, read as text (no Docker engine runs here, so it is never built)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from tests.deploy.kustomize_lite import render

ROOT = Path(__file__).resolve().parents[2]


def instructions(text: str) -> list[tuple[str, str]]:
    """Return ``(INSTRUCTION, arguments)`` pairs, continuation lines joined, comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


@pytest.fixture(scope="module")
def steps() -> list[tuple[str, str]]:
    return instructions((ROOT / "Dockerfile").read_text())


def args_of(steps: list[tuple[str, str]], name: str) -> list[str]:
    return [rest for word, rest in steps if word == name]


def test_parser_joins_continuations_and_drops_comments() -> None:
    parsed = instructions("# c\nFROM a:1 AS b\nRUN x \\\n    && y\n")
    assert parsed == [("FROM", "a:1 AS b"), ("RUN", "x && y")]


def test_bases_are_pinned_slim_python_and_multi_stage(steps: list[tuple[str, str]]) -> None:
    bases = [rest.split()[0] for rest in args_of(steps, "FROM")]
    assert len(bases) >= 2, "build and runtime stages"
    for base in bases:
        image, _, tag = base.partition("@")[0].partition(":")
        assert image == "python"
        # An exact patch version (3.11.x), slim, a named Debian release; never "latest".
        assert re.fullmatch(r"3\.11\.\d+-slim-bookworm", tag), base


def test_runs_as_a_non_root_user_matching_the_deployment(steps: list[tuple[str, str]]) -> None:
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    users = [rest for word, rest in steps[last_from:] if word == "USER"]
    assert users, "the runtime stage sets USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit()
    assert int(uid) > 0
    (deployment,) = [
        o
        for o in render(ROOT / "deploy" / "base")
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "foresight"
    ]
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid)


def test_no_remote_add_and_only_needed_sources(steps: list[tuple[str, str]]) -> None:
    assert not [rest for rest in args_of(steps, "ADD") if re.search(r"https?://", rest)]
    assert not args_of(steps, "ADD"), "COPY is explicit; ADD also unpacks archives"
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    packages = ("forecaster", "policy", "api", "pipelines", "cli")
    for source in ("pyproject.toml", "README.md", *packages):
        assert any(source in rest for rest in args_of(steps, "COPY")), source
        assert source not in ignored, f"{source} is copied but .dockerignore drops it"
    assert {".git", ".venv", "models", "data", "tests"} <= set(ignored)


def test_serves_foresight_on_port_8000(steps: list[tuple[str, str]]) -> None:
    assert args_of(steps, "EXPOSE") == ["8000"]
    entrypoint = json.loads(args_of(steps, "ENTRYPOINT")[-1])
    command = json.loads(args_of(steps, "CMD")[-1])
    assert entrypoint == ["foresight"]
    assert command[:1] == ["serve"]
    assert command[command.index("--host") + 1] == "0.0.0.0"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "foresight" in scripts
    (healthcheck,) = args_of(steps, "HEALTHCHECK")
    assert "/healthz" in healthcheck
