"""The CLI loads a command's libraries only when that command runs.

The start-up time itself is a benchmark (benchmarks/cli_startup.py); what can be
tested is its cause: which modules ``foresight --help`` imports.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from cli import _Commands, app

HEAVY = ("pandas", "numpy", "sklearn", "mlflow", "matplotlib", "fastapi", "sqlalchemy")


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"], ["simulate-typo"]])
def test_help_and_a_typo_import_no_heavy_library(args: list[str]) -> None:
    probe = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from cli import app\n"
        f"CliRunner().invoke(app, {args!r})\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "", f"`foresight {' '.join(args)}` imported {done.stdout}"


@pytest.mark.parametrize("name", sorted(_Commands.lazy_commands))
def test_listed_summary_is_the_first_line_of_the_command_docstring(name: str) -> None:
    lazy = _Commands.lazy_commands[name]
    loaded = lazy.load()
    if isinstance(loaded, typer.Typer):  # a group: its help is its summary
        docstring = str(loaded.info.help)
    else:
        docstring = inspect.getdoc(loaded) or ""
    assert lazy.summary == docstring.splitlines()[0]


def test_help_lists_every_command_and_a_lazy_command_shows_its_options() -> None:
    runner = CliRunner()
    listing = runner.invoke(app, ["--help"], terminal_width=200)
    assert listing.exit_code == 0, listing.output
    for name in ("train", "backtest", "forecast", *_Commands.lazy_commands):
        assert f" {name} " in listing.output, name
    serve_help = runner.invoke(app, ["serve", "--help"], terminal_width=200)
    assert serve_help.exit_code == 0, serve_help.output
    assert "--mlflow-ui-port" in serve_help.output


def test_a_typo_suggests_the_lazy_command() -> None:
    result = CliRunner().invoke(app, ["serv"])
    assert result.exit_code == 2
    assert "Did you mean 'serve'?" in result.output
