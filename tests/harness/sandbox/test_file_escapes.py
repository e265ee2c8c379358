"""Escapes through the harness's own hands: an agent in the real OS sandbox (the real Claude
Code CLI in bubblewrap, run by the orchestrator against the scripted model) asks the harness
to share a file on a path through a folder its background loop keeps swapping for a symbolic
link to what the harness can read and the sandbox cannot (the harness's ``/proc/self``, its
home). Whatever the timing, what reaches the thread is the agent's own file or nothing, and
no tool result carries the harness's secrets; a plain share still works."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.agents.shared_files import SharedFile
from harness.testing.scripted_model import ModelRequest, ToolCall, Turn
from tests.harness.conftest import HarnessFactory
from tests.support import AnsweringHumans

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SHARE = "mcp__harness__share_file"
TRIES, AT_ONCE = 50, 5  # shares asked, in turns of parallel calls
AGENTS = b"the agent's own file\n"
REPORT = b"a report worth sharing\n"
CANARY = "PRIVATE KEY canary-5f1e2d3c4b5a"

# The agent's loop: ``d`` a folder holding the file, then a link (``l``) in its place, and
# back, as fast as renames go, until ``stop`` appears; ``swaps`` says it ran.
SWAPPER = """\
import os
n = 0
while not os.path.exists("stop"):
    os.rename("d", "p"); os.rename("l", "d"); os.rename("d", "l"); os.rename("p", "d")
    n += 1
    if n % 100 == 1:
        with open("swaps.tmp", "w") as out:
            out.write(str(n))
        os.replace("swaps.tmp", "swaps")
"""


class Thread:
    """A front end that shows every shared file to the task's people: here, a list."""

    def __init__(self) -> None:
        self.shared: list[SharedFile] = []

    def reaches(self, task: Any) -> bool:
        return True

    async def share(self, file: SharedFile, task: Any) -> str | None:
        self.shared.append(file)
        return None


class Swapping:
    """The model's script: set the trap and start the loop, share through it ``TRIES``
    times, stop the loop, share a plain file by its absolute path, finish."""

    def __init__(self, target: str, name: str) -> None:
        self.setup = (
            f'mkdir d && printf %s "{AGENTS.decode().strip()}" > d/{name} && echo >> d/{name}'
            f" && printf '{REPORT.decode().strip()}\\n' > report.txt && ln -s {target} l"
            f" && cat > swap.py <<'PY'\n{SWAPPER}PY\n"
            "(setsid python3 swap.py > /dev/null 2>&1 < /dev/null &)"
            " && until [ -e swaps ]; do :; done && pwd"
        )
        self.name = name

    def __call__(self, request: ModelRequest) -> Turn:
        results = request.all_tool_results
        if not results:
            return Turn.call("Bash", command=self.setup, description="set the trap")
        shares = len([r for r in results if r.tool_name == SHARE])
        if shares < TRIES:
            calls = (ToolCall(SHARE, {"path": f"d/{self.name}"}),) * AT_ONCE
            return Turn(tool_calls=calls)
        if len(results) == 1 + TRIES:
            return Turn.call("Bash", command="touch stop && cat swaps", description="stop")
        if len(results) == 2 + TRIES:
            folder = results[0].text.strip().splitlines()[-1]
            return Turn.call(SHARE, path=f"{folder}/report.txt", title="The report")
        return Turn.finish("tried")


def environment_entries() -> list[bytes]:
    """The harness's environment as ``/proc/self/environ`` shows it (as the process started):
    what a read of that file through the link would share."""
    entries = Path("/proc/self/environ").read_bytes().split(b"\0")
    return [entry for entry in entries if len(entry) >= 8]


@pytest.mark.parametrize("through", ["/proc/self", "home"])
async def test_a_folder_swapped_for_a_link_never_shares_what_the_harness_can_read(
    harness_with: HarnessFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    through: str,
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(CANARY + "\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    target, name = ("/proc/self", "environ")
    if through == "home":
        target, name = str(home / ".ssh"), "id_ed25519"
    held = [CANARY.encode(), *environment_entries()]
    script = Swapping(target, name)
    orchestrator, model = await harness_with(script)
    thread = Thread()
    orchestrator.files.add_file_channel(thread)
    orchestrator.humans.add_human_channel(
        AnsweringHumans(orchestrator.humans.answer_question, "Allow once")
    )

    record = await orchestrator.run("developer", "share the file", requested_by="U42")

    assert record.status == "completed", record.error
    results = model.main_requests[-1].all_tool_results
    assert int(results[1 + TRIES].text.strip()) > 0  # the loop swapped all along
    shares = [r for r in results if r.tool_name == SHARE]
    assert len(shares) == TRIES + 1
    told = "\n".join(r.text for r in results).encode()
    # Counted, never shown: a failure must not print the environment it guards.
    assert sum(secret in told for secret in held) == 0, "the harness's secrets reached the agent"
    leaked = sum(secret in file.content for secret in held for file in thread.shared)
    assert leaked == 0, "the harness's secrets reached the thread"
    # What was shared is the agent's file, or the report: nothing else, ever.
    assert {f.content for f in thread.shared[:-1]} <= {AGENTS}
    assert thread.shared[-1].content == REPORT and thread.shared[-1].title == "The report"
    assert not shares[-1].is_error, shares[-1].text
    # Each try through the loop either shared the agent's file or said why not.
    refused = [r.json()["error"]["code"] for r in shares[:-1] if r.is_error]
    assert set(refused) <= {"PERMISSION_DENIED", "INVALID_INPUT"}
    assert len(refused) + len(thread.shared) - 1 == TRIES
