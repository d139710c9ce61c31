"""The addresses serve prints: every line before the one that says how to stop."""

from __future__ import annotations

import pytest

from cli.serve import _print_addresses


@pytest.mark.parametrize("training", [True, False])
def test_the_banner_ends_with_how_to_stop(
    training: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    _print_addresses("127.0.0.1", 8000, "http://127.0.0.1:5000/", True, training=training)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Foresight is serving on http://127.0.0.1:8000"
    assert lines[-1] == "Ctrl-C stops."
    said_training = [line for line in lines if line.strip().startswith("training:")]
    assert len(said_training) == (1 if training else 0)
