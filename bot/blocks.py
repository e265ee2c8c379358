"""Block Kit rendering of what the bot posts. Pure functions, no I/O.

Every text that came from a person or a model is escaped (``&``, ``<``, ``>``). Long results
are split over several messages within Slack's limits (section text <= 3,000 characters,
<= 50 blocks, fallback text under 4,000 characters) and nothing is ever dropped: the chunks
of a text, joined, are the text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal, NotRequired, TypedDict

from harness.agents.pool import AgentState
from harness.cli.render import usage_parts
from harness.tasks.model import DispatchRecord

SECTION_LIMIT = 3000
MAX_BLOCKS = 50
# Section text per message, so that the plain-text fallback stays well under 4,000 chars.
MESSAGE_TEXT_LIMIT = 3500
# A diff longer than this is uploaded as a file rather than shown in the result.
INLINE_DIFF_CHARS = 2000
INLINE_DIFF_LINES = 40


class TextObject(TypedDict):
    type: Literal["mrkdwn", "plain_text"]
    text: str


class SectionBlock(TypedDict):
    type: Literal["section"]
    text: TextObject


class ContextBlock(TypedDict):
    type: Literal["context"]
    elements: list[TextObject]


class ButtonElement(TypedDict):
    type: Literal["button"]
    action_id: str
    text: TextObject
    value: str
    style: NotRequired[Literal["primary", "danger"]]


class OptionObject(TypedDict):
    text: TextObject
    value: str


class SelectElement(TypedDict):
    """A menu (a plan's model menu): its pick is read from the state of a button's click."""

    type: Literal["static_select"]
    action_id: str
    placeholder: TextObject
    options: list[OptionObject]
    initial_option: NotRequired[OptionObject]


class ActionsBlock(TypedDict):
    type: Literal["actions"]
    block_id: str
    elements: list[ButtonElement | SelectElement]


class FeedbackButton(TypedDict):
    text: TextObject
    value: str


class FeedbackButtons(TypedDict):
    type: Literal["feedback_buttons"]
    action_id: str
    positive_button: FeedbackButton
    negative_button: FeedbackButton


class ContextActionsBlock(TypedDict):
    type: Literal["context_actions"]
    elements: list[FeedbackButtons]


Block = SectionBlock | ContextBlock | ActionsBlock | ContextActionsBlock


class SlackMessage(TypedDict):
    """What goes to chat.postMessage / chat.update: blocks plus the plain-text fallback."""

    text: str
    blocks: list[Block]


STATUS_EMOJI = {
    "completed": "✅",
    "failed": "❌",
    "killed": "⏹️",
    "interrupted": "⏸️",
    "queued": "⏳",
    "running": "⚙️",
    "waiting": "⏳",
}
_VERBS = {
    "completed": "finished",
    "failed": "failed",
    "killed": "was stopped",
    "interrupted": "was interrupted",
    "queued": "is queued",
    "running": "is working",
    "waiting": "is waiting",
}
_NEXT_STEP = {
    "failed": "reply in this thread to try again (say what to change), or run "
    "`harness show {slug}` to read the agent's journal.",
    "killed": "reply in this thread when you want the work to go on.",
    "interrupted": "press *Run again* to start it over with the same request, or reply in "
    "this thread to pick the task up from here.",
}


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def excerpt(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def mention(user: str) -> str:
    """``<@U123>`` for a well-formed user id; anything else is shown escaped, not linked."""
    return f"<@{user}>" if re.fullmatch(r"[UW][A-Z0-9]{1,20}", user) else escape(user)


def _cut(text: str, limit: int) -> int:
    """Where to cut ``text`` (longer than ``limit``): after a newline, else after a space,
    else hard; never inside an ``&...;`` entity."""
    window = text[:limit]
    cut = window.rfind("\n") + 1
    if cut < limit // 2:
        cut = max(cut, window.rfind(" ") + 1)
    if cut < limit // 2:
        cut = limit
    for start in range(max(0, cut - 4), cut):  # an entity is at most 5 chars: "&amp;"
        entity = re.match(r"&(amp|lt|gt);", text[start:])
        if entity and start + len(entity.group(0)) > cut:
            return start if start > 0 else len(entity.group(0))
    return cut


def split_text(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Chunks of at most ``limit`` characters whose concatenation is exactly ``text``."""
    chunks: list[str] = []
    while len(text) > limit:
        cut = _cut(text, limit)
        chunks.append(text[:cut])
        text = text[cut:]
    if text or not chunks:
        chunks.append(text)
    return chunks


def section_block(text: str) -> SectionBlock:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context_block(text: str) -> ContextBlock:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def pack(pieces: Sequence[str], footer: str) -> list[SlackMessage]:
    """Lays escaped mrkdwn ``pieces`` out as sections over as many messages as needed; the
    last message ends with the ``footer`` context line."""
    chunks = [chunk for piece in pieces if piece for chunk in split_text(piece)]
    pages: list[list[str]] = [[]]
    used = 0
    for chunk in chunks:
        page = pages[-1]
        if page and (used + len(chunk) > MESSAGE_TEXT_LIMIT or len(page) >= MAX_BLOCKS - 2):
            pages.append([])
            used = 0
        pages[-1].append(chunk)
        used += len(chunk)
    messages: list[SlackMessage] = []
    for number, page in enumerate(pages, 1):
        blocks: list[Block] = [section_block(chunk) for chunk in page]
        notes = [f"part {number} of {len(pages)}"] if len(pages) > 1 else []
        if number == len(pages) and footer:
            notes.append(footer)
        if notes:
            blocks.append(context_block(" · ".join(notes)))
        text = "\n".join([*page, *notes])
        messages.append({"text": text, "blocks": blocks})
    return messages


def _bullets(title: str, items: Sequence[str], *, numbered: bool = False) -> str:
    if not items:
        return ""
    lines = [title]
    for n, item in enumerate(items, 1):
        lines.append(f"{n}. {escape(item)}" if numbered else f"• {escape(item)}")
    return "\n".join(lines)


def usage_line(record: DispatchRecord, task_slug: str | None = None) -> str:
    parts = [f"agent `{escape(record.agent_id)}`"]
    if task_slug:
        parts.append(f"task `{escape(task_slug)}`")
    if record.model:  # the model it ran (its role's, or the one its request picked)
        parts.append(f"model `{escape(record.model)}`")
    return " · ".join([*parts, *usage_parts(record)])


def clean_error(error: str, limit: int = 800) -> str:
    """A user-facing reason: never a stack trace, never a wall of text."""
    text = error.split("Traceback (most recent call last)")[0].strip() or "an internal error"
    lines = [line for line in text.splitlines() if line.strip()][:6]
    return excerpt("\n".join(lines), limit) if len(text) > limit else "\n".join(lines)


def diff_fits_inline(diff: str) -> bool:
    """Whether a diff is short enough to read in the result message; a longer one is
    uploaded as a file beside it."""
    return len(escape(diff)) <= INLINE_DIFF_CHARS and diff.count("\n") <= INLINE_DIFF_LINES


def diff_file_name(task_slug: str, agent_id: str) -> str:
    return f"{task_slug}-{agent_id}.diff"


def render_record(
    record: DispatchRecord,
    *,
    task_slug: str | None = None,
    stopped_by: str | None = None,
    drafted_by: str | None = None,
    diff: str | None = None,
) -> list[SlackMessage]:
    """An agent's final record: role and status, summary, changes, issues, questions (which
    people answer by replying in the thread), where the work is (branch, head, diff stat, and
    the ``diff`` itself when it fits, else a word that it follows as a file), a failure's
    reason and next step, and a context line with agent id, duration, cost and turns."""
    status = record.status
    header = f"{STATUS_EMOJI.get(status, '•')} *{escape(record.role)}* {_VERBS.get(status, status)}"
    if status == "killed" and stopped_by:
        header += f" by {mention(stopped_by)}"
    if status != "completed":  # a failure names its agent up front
        header += f" (agent `{escape(record.agent_id)}`)"
    if drafted_by:
        header += f" · drafted by {escape(drafted_by)}"
    pieces = [header]
    result = record.result
    if result is not None:
        pieces.append(escape(result.summary))
        pieces.append(_bullets("*Changes*", result.changes))
        pieces.append(_bullets("*Issues*", result.issues))
        pieces.append(
            _bullets(
                "*Questions* (reply in this thread to answer)", result.questions, numbered=True
            )
        )
    if record.branch:
        head = f" at `{escape(record.head_commit[:12])}`" if record.head_commit else ""
        work = f"*Branch* `{escape(record.branch)}`{head}"
        if record.diff_stat:
            work += f"\n```{escape(record.diff_stat.strip())}```"
        if diff and diff_fits_inline(diff):
            work += f"\n*Diff*\n```{escape(diff.rstrip())}```"
        elif diff:
            name = diff_file_name(task_slug or "task", record.agent_id)
            work += f"\nThe full diff follows as the file `{escape(name)}`."
        pieces.append(work)
    if status != "completed":
        label = "*What failed:*" if status == "failed" else "*Why:*"
        reason = record.error or "no reason was recorded"
        if status == "killed" and stopped_by:  # how, from the kill's reason ("… with X")
            how = (record.error or "").rpartition(" with ")[2] or "`/harness kill`"
            reason = f"stopped from Slack with {how}"
        pieces.append(f"{label} {escape(clean_error(reason))}")
        if status == "interrupted":
            pieces.append(f"It had been working since {_when(record.started_at)}.")
        if result is None and record.last_text:
            quoted = escape(excerpt(record.last_text, 1500))
            pieces.append(f"*The agent's last words:*\n> {quoted}")
        step = _NEXT_STEP.get(status, "reply in this thread to continue.")
        pieces.append(f"*What to do next:* {step.format(slug=escape(task_slug or '<task>'))}")
    elif result is None:  # completed without a structured result: say so, keep the text
        pieces.append(escape(record.last_text or "The agent finished without a result."))
    return pack(pieces, usage_line(record, task_slug))


def _when(iso: str) -> str:
    """``2026-11-22T10:04:05.123Z`` -> ``2026-11-22 10:04:05 UTC``."""
    return f"{iso[:19].replace('T', ' ')} UTC" if len(iso) >= 19 else iso


def status_text(
    role: str,
    agent_id: str,
    *,
    state: AgentState,
    elapsed_seconds: float,
    activity: str,
    intro: str | None = None,
) -> str:
    """``⚙️ developer is working… agent a1b2c3, 12 s, using Edit``."""
    line = (
        f"{STATUS_EMOJI[state]} {escape(role)} {_VERBS[state]}… agent {escape(agent_id)}, "
        f"{int(elapsed_seconds)} s, {escape(excerpt(activity, 60))}"
    )
    return f"{intro}\n{line}" if intro else line


def drafted_intro(
    parent_role: str | None, parent_id: str, role: str, agent_id: str, prompt: str
) -> str:
    """How a drafted agent announces itself in the thread."""
    who = (
        f"{escape(parent_role)} `{escape(parent_id)}`" if parent_role else f"`{escape(parent_id)}`"
    )
    return (
        f"🤖 {who} drafted *{escape(role)}* `{escape(agent_id)}`: “{escape(excerpt(prompt, 200))}”"
    )


UNSEEN = (
    "I couldn't see any words in that message: it has only invisible characters (zero-width "
    "spaces or the like). Write what you'd like done and I'll start on it."
)


def cut_notice(kept: int, cut: int) -> str:
    """Said to the person whose message was longer than the bot takes."""
    return (
        f"Your message is longer than {kept:,} characters: I took the first {kept:,}, and "
        f"the agent is told that {cut:,} more were not received. Attach a long text as a "
        "file to give it whole."
    )


def waiting_text(busy: Sequence[tuple[str, str]]) -> str:
    """The notice for a follow-up that waits for the thread's running agents."""
    if not busy:
        return "⏳ Got it. I'll pick this up as soon as the earlier request in this thread is done."
    names = ", ".join(f"{escape(role)} `{escape(agent_id)}`" for role, agent_id in busy)
    verb, it = ("is", "it finishes") if len(busy) == 1 else ("are", "they finish")
    return (
        f"⏳ Got it. {names} {verb} still working in this thread; I'll pick your message up "
        f"when {it}."
    )


def failure_message(what: str, *, next_step: str, agent_id: str | None = None) -> SlackMessage:
    """A failure the bot itself hit (no agent record): what, which agent, what to do."""
    lines = [f"❌ {escape(clean_error(what))}"]
    if agent_id:
        lines.append(f"Agent: `{escape(agent_id)}`")
    lines.append(f"*What to do next:* {next_step}")
    text = "\n".join(lines)
    return {"text": text, "blocks": [section_block(text)]}


RERUN_ACTION = "harness_rerun"
# A menu beside *Run again*: picking a model runs it again with that one (value "<id> <model>").
RERUN_MODEL_ACTION = "harness_rerun_model"


def with_rerun_button(
    messages: list[SlackMessage], agent_id: str, models: Sequence[str] = ()
) -> list[SlackMessage]:
    """``messages`` with a *Run again* button (for an interrupted agent) under the last one,
    and a menu to run it again with another of ``models`` (its role's) when there are some."""
    elements: list[ButtonElement | SelectElement] = [
        {
            "type": "button",
            "action_id": RERUN_ACTION,
            "text": {"type": "plain_text", "text": "Run again"},
            "value": agent_id,
        }
    ]
    if len(models) > 1:
        options: list[OptionObject] = [
            {"text": {"type": "plain_text", "text": m[:75]}, "value": f"{agent_id} {m}"}
            for m in models
        ]
        elements.append({"type": "static_select", "action_id": RERUN_MODEL_ACTION,
                         "placeholder": {"type": "plain_text", "text": "Run again with…"},
                         "options": options})  # fmt: skip
    button: Block = {"type": "actions", "block_id": "harness_rerun", "elements": elements}
    last = messages[-1]
    return [*messages[:-1], {"text": last["text"], "blocks": [*last["blocks"], button]}]


def rerun_done(message: SlackMessage, user: str, agent_id: str) -> SlackMessage:
    """The interrupted notice once someone pressed *Run again*: the button gives way to who
    did and which agent runs now."""
    note = context_block(f"↻ {mention(user)} ran it again as agent `{escape(agent_id)}`")
    blocks = [b for b in message["blocks"] if b.get("block_id") != "harness_rerun"]
    return {"text": message["text"], "blocks": [*blocks, note]}


REPOSITORY_ACTION_PREFIX = "harness_repo_"


def repository_question(candidates: Sequence[str]) -> SlackMessage:
    """Which repository a request is about, asked in its thread: a button per repository."""
    text = "Which repository is this about? (Next time, say `repo:NAME` in the message.)"
    buttons: Block = {
        "type": "actions",
        "block_id": "harness_repository",
        "elements": [
            {
                "type": "button",
                "action_id": f"{REPOSITORY_ACTION_PREFIX}{n}",
                "text": {"type": "plain_text", "text": name[:75]},
                "value": name,
            }
            for n, name in enumerate(candidates)
        ],
    }
    return {"text": text, "blocks": [section_block(f"📁 {text}"), buttons]}
