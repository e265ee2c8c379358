from harness.config.settings import McpSettings
from harness.runtime.spec import qualified
from harness.tools.access import ALL_TOOLS, EVERY_ROLE_TOOLS, tools_for_category


def test_full_access_category_gets_every_tool() -> None:
    assert tools_for_category("conversational", McpSettings()) == ALL_TOOLS


def test_other_categories_get_the_read_only_and_human_tools() -> None:
    assert tools_for_category("worker", McpSettings()) == EVERY_ROLE_TOOLS


def test_allow_pattern_adds_a_tool_to_a_worker_category() -> None:
    settings = McpSettings(allow={"worker": ("mcp__harness__await_*",)})
    assert "await_agent" in tools_for_category("worker", settings)
    assert "draft_agent" not in tools_for_category("worker", settings)


def test_deny_pattern_wins_over_full_access() -> None:
    settings = McpSettings(deny={"conversational": ("kill_*",)})
    tools = tools_for_category("conversational", settings)
    assert "kill_agent" not in tools
    assert "draft_agent" in tools


def test_qualified_name_is_what_the_model_sees() -> None:
    assert qualified("draft_agent") == "mcp__harness__draft_agent"
