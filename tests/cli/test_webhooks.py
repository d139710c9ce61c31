"""``foresight webhooks dead|retry`` and the outbox line of ``foresight jobs``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from cli.support import console
from pipelines.store.store import Store, open_store

T0 = datetime(2025, 3, 1, 12, tzinfo=UTC)


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", 200)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "foresight.yaml"
    path.write_text(f"root: {tmp_path}\n")
    return path


def store_of(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'data' / 'foresight.db'}")


@pytest.fixture
def dead(tmp_path: Path) -> list[int]:
    with store_of(tmp_path) as store:
        ids = [store.outbox.enqueue(f"http://r{i}.test/hook", b"{}", "k", now=T0) for i in range(3)]
        store.outbox.claim_due(now=T0)
        store.outbox.give_up(ids[0], "HTTP 401 Unauthorized: bad signature", now=T0)
        store.outbox.give_up(ids[1], "HTTP 404 Not Found", now=T0)
        store.outbox.mark_delivered(ids[2], now=T0)
    return ids[:2]


def test_jobs_shows_the_dead_letters_and_how_to_retry(config: Path, dead: list[int]) -> None:
    result = CliRunner().invoke(app, ["jobs", "--config", str(config)])

    assert result.exit_code == 0, result.output
    assert "Webhook outbox: 0 pending, 1 delivered, 2 dead" in result.output
    assert "foresight webhooks retry --all" in result.output


def test_dead_lists_each_dead_letter_with_its_error(config: Path, dead: list[int]) -> None:
    result = CliRunner().invoke(app, ["webhooks", "dead", "--config", str(config)])

    assert result.exit_code == 0, result.output
    assert "HTTP 401 Unauthorized: bad signature" in result.output
    assert "http://r1.test/hook" in result.output
    assert "0 pending, 1 delivered, 2 dead" in result.output


def test_retry_makes_dead_letters_pending_again(
    config: Path, dead: list[int], tmp_path: Path
) -> None:
    one = CliRunner().invoke(app, ["webhooks", "retry", str(dead[0]), "--config", str(config)])
    rest = CliRunner().invoke(app, ["webhooks", "retry", "--all", "--config", str(config)])

    assert one.exit_code == 0, one.output
    assert f"webhook #{dead[0]} pending again" in one.output
    assert f"webhook #{dead[1]} pending again" in rest.output
    with store_of(tmp_path) as store:
        assert store.outbox.counts() == {"pending": 2, "delivered": 1, "dead": 0}
        assert sorted(item.id for item in store.outbox.claim_due()) == dead


def test_retrying_what_is_not_a_dead_letter_fails_and_says_why(
    config: Path, dead: list[int]
) -> None:
    result = CliRunner().invoke(app, ["webhooks", "retry", "999", "--config", str(config)])
    neither = CliRunner().invoke(app, ["webhooks", "retry", "--config", str(config)])

    assert result.exit_code == 1
    assert "webhook #999 does not exist, not a dead letter" in result.output
    assert neither.exit_code == 2
    assert "give dead-letter ids, or --all" in neither.output
