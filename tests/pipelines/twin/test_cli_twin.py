"""``foresight twin``: bad input is refused with a message naming the option."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--semantics", "eager"], "--semantics must be 'replay' or 'autoscaler'"),
        (["--source", "nowhere"], "--source must be one of sample, earth-total"),
        (["--steps", "6", "--kill-after", "5"], "--kill-after [5] must name steps from 0 to 4"),
    ],
)
def test_bad_options_are_named(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["twin", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_a_used_workdir_is_refused(tmp_path: Path) -> None:
    (tmp_path / "left-over").write_text("x", encoding="utf-8")
    result = CliRunner().invoke(app, ["twin", "--workdir", str(tmp_path)])
    assert result.exit_code == 2
    assert "is not empty" in " ".join(result.output.split())
