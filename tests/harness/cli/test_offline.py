"""What counts as a way to reach a model before ``harness run`` starts anything."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.cli.offline import (
    exported_keys,
    harness_command,
    model_access,
    require_model_access,
    scripted_env,
)
from harness.errors import HarnessError


@pytest.mark.parametrize(
    "name",
    ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_BASE_URL"],
)
def test_a_key_token_or_gateway_in_the_environment_is_access(name: str, tmp_path: Path) -> None:
    assert model_access({name: "x"}, tmp_path) == f"${name}"


def test_an_empty_variable_is_no_access(tmp_path: Path) -> None:
    assert model_access({"ANTHROPIC_API_KEY": " "}, tmp_path) is None


@pytest.mark.parametrize(("value", "access"), [("1", True), ("true", True), ("0", False)])
def test_a_cloud_provider_switched_on_is_access(value: str, access: bool, tmp_path: Path) -> None:
    found = model_access({"CLAUDE_CODE_USE_BEDROCK": value}, tmp_path)

    assert (found == "$CLAUDE_CODE_USE_BEDROCK") is access


def test_claude_codes_credentials_file_is_access(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / ".credentials.json").write_text("{}", encoding="utf-8")

    assert model_access({}, tmp_path) == f"the Claude Code login in {tmp_path / '.claude'}"


def test_claude_config_dir_moves_where_the_login_is_looked_for(tmp_path: Path) -> None:
    custom = tmp_path / "elsewhere"
    custom.mkdir()
    (custom / ".claude.json").write_text('{"oauthAccount": {"x": 1}}', encoding="utf-8")

    assert model_access({"CLAUDE_CONFIG_DIR": str(custom)}, tmp_path) is not None
    assert model_access({}, tmp_path) is None


def test_an_account_in_claude_json_or_an_api_key_helper_is_access(tmp_path: Path) -> None:
    (tmp_path / ".claude.json").write_text('{"oauthAccount": {}}', encoding="utf-8")
    assert model_access({}, tmp_path) == f"the Claude Code login named in {tmp_path}/.claude.json"

    (tmp_path / ".claude.json").write_text('{"numStartups": 3}', encoding="utf-8")
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(
        '{"apiKeyHelper": "vault read key"}', encoding="utf-8"
    )
    assert model_access({}, tmp_path) is not None


def test_without_any_access_the_error_says_what_to_set_and_how_to_try_offline(
    tmp_path: Path,
) -> None:
    with pytest.raises(HarnessError) as caught:
        require_model_access({"HOME": str(tmp_path)}, tmp_path)

    assert "ANTHROPIC_API_KEY" in caught.value.message
    assert "export ANTHROPIC_API_KEY=" in caught.value.fix
    assert 'harness run --scripted "' in caught.value.fix


def test_the_scripted_models_env_blanks_every_other_route_to_a_model() -> None:
    env = scripted_env({"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_API_KEY": "fake"})

    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert env["ANTHROPIC_API_KEY"] == "fake"  # the scripted model's own, not an exported one
    assert env["CLAUDE_CODE_OAUTH_TOKEN"] == env["ANTHROPIC_AUTH_TOKEN"] == ""
    assert env["CLAUDE_CODE_USE_BEDROCK"] == ""


def test_exported_keys_are_named_without_their_values() -> None:
    environ = {"ANTHROPIC_API_KEY": "sk-ant-x", "SLACK_BOT_TOKEN": "xoxb-y", "SLACK_APP_TOKEN": ""}

    assert exported_keys(environ) == ["ANTHROPIC_API_KEY", "SLACK_BOT_TOKEN"]
    assert exported_keys({}) == []


def test_the_harness_command_is_the_script_next_to_this_python_relative_to_here(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "harness").exists()  # the test venv installs it

    monkeypatch.chdir(bin_dir.parent)
    assert harness_command() == str(Path(bin_dir.name) / "harness")
    monkeypatch.chdir(tmp_path)  # elsewhere: the full path
    assert harness_command() == str(bin_dir / "harness")
