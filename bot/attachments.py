"""The files of a person's message, as the bot hands them to an agent. Pure functions over
untrusted input (the event's ``files``, and those of a forwarded message's ``attachments``).

Which files to fetch (``select``: within ``slack.files`` in config.yaml), what a fetched
file is (``media_type_of``: an image the model takes, or UTF-8 text; nothing else), and what
the thread is told of those left out (``left_out_text``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.blocks import escape
from harness.config.settings import FileLimits
from harness.runtime.attachments import LeftOut, human_size

# What a message of files alone asks for: the agent looks at them.
FILES_ONLY_REQUEST = "Look at the attached files."
# Types that are never text, whatever their bytes decode as.
_BINARY_PREFIXES = ("image/", "audio/", "video/", "font/")
_BINARY_TYPES = frozenset(
    {
        "application/pdf",
        "application/zip",
        "application/gzip",
        "application/x-tar",
        "application/x-7z-compressed",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    }
)
# Slack's modes of a file the bot cannot have: deleted, or past the workspace's plan limits.
_GONE_MODES = {
    "tombstone": "it was deleted",
    "hidden_by_limit": "it is hidden by the workspace's plan limits",
}
UNSUPPORTED = "not an image (PNG, JPEG, GIF, WebP) or a UTF-8 text file"


@dataclass(frozen=True)
class SlackFile:
    """A file shared in a message, as the event describes it."""

    id: str
    name: str
    mimetype: str = ""
    size: int | None = None
    # url_private_download (else url_private); None: ask files.info for it.
    url: str | None = None
    # Why it cannot be had at all ("" when it may): deleted, hidden by the plan.
    gone: str = ""


def _file(raw: Mapping[str, Any]) -> SlackFile | None:
    file_id = raw.get("id")
    if not isinstance(file_id, str) or not file_id:
        return None
    name = raw.get("name") or raw.get("title") or file_id
    size = raw.get("size")
    url = raw.get("url_private_download") or raw.get("url_private")
    return SlackFile(
        id=file_id,
        name=str(name),
        mimetype=str(raw.get("mimetype") or ""),
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        url=url if isinstance(url, str) and url else None,
        gone=_GONE_MODES.get(str(raw.get("mode") or ""), ""),
    )


def files_of(event: Mapping[str, Any]) -> tuple[SlackFile, ...]:
    """The files of a message event (or of a shortcut's message): its own, then those of
    the messages forwarded in it (``attachments[].files``), each once."""
    raws: list[Any] = list(event.get("files") or [])
    for attachment in event.get("attachments") or []:
        if isinstance(attachment, Mapping):
            raws.extend(attachment.get("files") or [])
    found: dict[str, SlackFile] = {}
    for raw in raws:
        file = _file(raw) if isinstance(raw, Mapping) else None
        if file is not None and file.id not in found:
            found[file.id] = file
    return tuple(found.values())


def select(
    files: Sequence[SlackFile], limits: FileLimits
) -> tuple[tuple[SlackFile, ...], tuple[LeftOut, ...]]:
    """The files to fetch, in order, and those left out: past ``maxCount`` or known to be over
    ``maxBytes`` (not fetched at all), or gone."""
    kept: list[SlackFile] = []
    left: list[LeftOut] = []
    for file in files:
        if file.gone:
            left.append(LeftOut(file.name, f"I cannot read it: {file.gone}"))
        elif file.size is not None and file.size > limits.max_bytes:
            left.append(over_size(file.name, file.size, limits))
        elif len(kept) >= limits.max_count:
            left.append(
                LeftOut(
                    file.name,
                    f"a message may attach {limits.max_count} file(s) "
                    "(`slack.files.maxCount` in config.yaml)",
                )
            )
        else:
            kept.append(file)
    return tuple(kept), tuple(left)


def over_size(name: str, size: int | None, limits: FileLimits) -> LeftOut:
    shown = f"{human_size(size)}, " if size is not None else ""
    return LeftOut(
        name,
        f"{shown}over the {human_size(limits.max_bytes)} limit "
        "(`slack.files.maxBytes` in config.yaml)",
    )


def _image_type(content: bytes) -> str | None:
    """The image type the bytes really are (a name or a declared type can lie)."""
    if content.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if content.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if content.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if content[:4] == b"RIFF" and content[8:12] == b"WEBP":
        return "image/webp"
    return None


def media_type_of(file: SlackFile, content: bytes) -> str | None:
    """What the agent gets the file as: an image's type, a text file's (``text/plain`` when
    Slack named none), or None for anything else (a PDF, an archive, bytes that are not
    UTF-8)."""
    image = _image_type(content)
    if image is not None:
        return image
    declared = file.mimetype.lower().split(";")[0].strip()
    if declared.startswith(_BINARY_PREFIXES) or declared in _BINARY_TYPES or b"\0" in content:
        return None
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return declared if declared.startswith("text/") else "text/plain"


def with_files_text(text: str, files: Sequence[SlackFile]) -> str:
    """A message of files alone still asks something: to look at them."""
    return text if text or not files else FILES_ONLY_REQUEST


def left_out_text(left_out: Sequence[LeftOut], *, kept: int) -> str:
    """The thread's word on the files the agent does not get."""
    # A file's name is the person's own text: shown as it is, never as Slack markup.
    names = [escape(item.name.replace("`", "'")) for item in left_out]
    lines = [f"• `{name}`: {item.reason}" for name, item in zip(names, left_out, strict=True)]
    if kept:
        after = "I went ahead with the rest of your message and files."
    else:
        after = "I went ahead with your message without them."
    what = "this file" if len(left_out) == 1 else f"these {len(left_out)} files"
    return f"I left out {what}:\n" + "\n".join(lines) + f"\n{after}"
