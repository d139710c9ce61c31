"""forecast_accuracy's options for design runs: more windows, no statsforecast peers."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks.forecast_accuracy import candidates, main
from benchmarks.peers import PeerAutoETS, PeerMSTL

STEP = pd.Timedelta(minutes=10)


def test_no_peers_keeps_our_families_and_persistence() -> None:
    full = candidates(STEP, horizon=18)
    ours = candidates(STEP, horizon=18, peers=False)
    peers = [m for m in full if isinstance(m, PeerAutoETS | PeerMSTL)]
    assert len(peers) == 2
    assert [m.model_name for m in ours] == [m.model_name for m in full if m not in peers]
    assert "persistence" in {m.model_name for m in ours}


@pytest.mark.parametrize("bad", ["0", "-3", "twelve"])
def test_windows_must_be_a_whole_number_of_at_least_one(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--windows", bad, "--no-peers"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--windows" in err
    assert "whole number >= 1" in err
