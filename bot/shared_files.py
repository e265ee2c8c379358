"""Files agents share (the ``share_file`` tool), shown in their task's thread: uploaded with
``files.uploadV2`` under a line that says which agent shared it."""

from __future__ import annotations

from bot.poster import Poster
from harness.agents.shared_files import SharedFile
from harness.tasks.model import Task


class SlackFileChannel:
    """The orchestrator's way to show a task's people a file: its Slack thread."""

    def __init__(self, poster: Poster) -> None:
        self.poster = poster

    def reaches(self, task: Task) -> bool:
        return task.thread is not None

    async def share(self, file: SharedFile, task: Task) -> str | None:
        if task.thread is None:
            return "the task has no Slack thread"
        comment = f"{file.role} `{file.agent_id}` shared a file: *{file.title}*"
        uploaded = await self.poster.upload(
            task.thread, file.name, file.content, title=file.title, comment=comment
        )
        return None if uploaded else "Slack refused the upload (see the bot's log)"
