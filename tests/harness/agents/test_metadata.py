from pathlib import Path

import pytest

from harness.agents.metadata import MetadataCollector, parse_output
from harness.config.settings import MetadataField


def test_output_that_is_json_becomes_a_value() -> None:
    assert parse_output("810\n") == 810
    assert parse_output("feature-x\n") == "feature-x"
    assert parse_output("  ") is None


@pytest.mark.anyio
async def test_a_failing_command_fills_only_its_own_error(tmp_path: Path) -> None:
    collector = MetadataCollector(
        [
            MetadataField("branch", "echo main"),
            MetadataField("pr", "echo 'gh: not found' >&2; exit 3"),
        ]
    )
    values = await collector.collect(tmp_path)
    assert values["branch"].value == "main"
    assert values["branch"].error is None
    assert values["pr"].value is None
    assert values["pr"].error is not None
    assert "exit 3" in values["pr"].error
    assert "gh: not found" in values["pr"].error


@pytest.mark.anyio
async def test_a_slow_command_times_out_with_an_error(tmp_path: Path) -> None:
    collector = MetadataCollector(
        [MetadataField("slow", "sleep 30", timeout_seconds=0.2), MetadataField("ok", "echo 1")]
    )
    values = await collector.collect(tmp_path)
    assert values["slow"].error is not None
    assert "timed out after 0.2 s" in values["slow"].error
    assert values["ok"].value == 1


@pytest.mark.anyio
async def test_commands_run_in_the_agents_cwd_and_are_cached(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    collector = MetadataCollector([MetadataField("here", "pwd; echo x >> runs")])
    first = await collector.collect(tmp_path)
    second = await collector.collect(tmp_path)
    assert first["here"].value == str(tmp_path)
    assert second == first
    assert counter.read_text(encoding="utf-8").count("x") == 1
