"""Saved decision runs: each case's runs in a file of their own, read back to rescore.

The cases are those of committed per-case runs (``benchmarks/results/
decision_quality_heldout/``), copied so nothing committed is rewritten.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import decision_quality
from benchmarks.decision_report import RUNS_FILE, runs_dir, saved_cases

HELD = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "decision_quality_heldout"
NAMES = ("alibaba_lora_x_lead10", "alibaba_lora_x_lead20")


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    copies = []
    for name in NAMES:
        copy = tmp_path / "held" / f"{name}.json"
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(HELD / f"{name}.json", copy)
        copies.append(copy)
    return copies


def _figures(path: Path) -> list[tuple[str, int, object]]:
    saved = json.loads(path.read_text())
    return [(c["case"], c["lead_minutes"], c["buffer_lead"]) for c in saved["cases"]]


def test_a_merge_names_the_runs_where_they_are_and_reads_them_back(
    runs: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "merged.json"
    assert decision_quality.main(["--merge", *map(str, runs), "--output", str(out)]) == 0
    merged = json.loads(out.read_text())
    assert [c["lead_minutes"] for c in merged["cases"]] == [10, 20]
    assert all("runs" not in c for c in merged["cases"])
    assert [c[RUNS_FILE] for c in merged["cases"]] == [f"held/{n}.json" for n in NAMES]
    assert not runs_dir(out).exists()  # nothing copied: the runs stay in their files
    for case, source in zip(saved_cases(out), runs, strict=True):
        assert case["runs"] == json.loads(source.read_text())["cases"][0]["runs"]
    assert _figures(out) == [f for r in runs for f in _figures(r)]
    before = out.read_text()
    assert decision_quality.main(["--rescore", "--output", str(out)]) == 0
    assert json.loads(out.read_text()) == json.loads(before)


def test_rescoring_a_file_with_its_runs_inline_moves_them_out_and_loses_none(
    runs: list[Path],
) -> None:
    path = runs[0]
    inline = json.loads(path.read_text())["cases"][0]["runs"]
    assert decision_quality.main(["--rescore", "--output", str(path)]) == 0
    saved = json.loads(path.read_text())["cases"][0]
    assert "runs" not in saved
    assert (path.parent / saved[RUNS_FILE]).parent == runs_dir(path)
    assert saved_cases(path)[0]["runs"] == inline


def test_a_case_lead_in_two_files_or_runs_made_differently_do_not_merge(
    runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "m.json")
    with pytest.raises(SystemExit):
        decision_quality.main(["--merge", str(runs[0]), str(runs[0]), "--output", out])
    assert "more than one file" in capsys.readouterr().err
    other = json.loads(runs[1].read_text())
    other["mode"] = "in-sample"
    runs[1].write_text(json.dumps(other))
    with pytest.raises(SystemExit):
        decision_quality.main(["--merge", *map(str, runs), "--output", out])
    assert "differ in 'mode'" in capsys.readouterr().err
