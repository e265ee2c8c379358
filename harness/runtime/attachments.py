"""Files a person attached to a request, as the agent gets them: plain data in its spec.

Every attachment is written, with its exact bytes, into the agent's working folder under
``.attachments/`` (kept out of git by a ``.gitignore`` there, so the task's branch never holds
them), and named in the prompt; an image the model accepts is also shown to it, as an image
block beside the prompt's text in its first message. The bytes travel in the spec as base64,
so a host on another machine writes the same files. Pure, but for ``write_attachments`` and
``keep_out_of_git`` (blocking: run them off the event loop), which write in the agent's
folder through ``harness.boundary.files``: by handle, no link followed.
"""

from __future__ import annotations

import base64
import re
import unicodedata
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.boundary.files import (
    BoundaryError,
    Folder,
    entry_kind,
    make_folders,
    read_file,
    write_file,
)

# The folder in the agent's working folder that holds what was attached.
ATTACHMENTS_DIR = ".attachments"
# Ignores everything in its folder, itself included: git never commits an attachment.
_GITIGNORE = "# Files attached to requests: never committed.\n*\n"
# What the model takes as image input (the Messages API's media types).
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# The Messages API refuses an image over 5 MB, and a request over 32 MB: images past these are
# attached as files only (the prompt says so).
MODEL_IMAGE_MAX_BYTES = 5 * 1024 * 1024
MODEL_IMAGES_MAX_BYTES = 20 * 1024 * 1024
_UNSAFE = re.compile(r"[^\w.+-]+")
# Attached files and their .gitignore: readable by the agent (and teammates), not executable.
_MODE = 0o644


@dataclass(frozen=True)
class Attachment:
    """One attached file: its name in ``.attachments/``, its media type and its bytes."""

    name: str
    media_type: str
    data: str  # base64 of the exact bytes
    size: int

    @property
    def path(self) -> str:
        """Where the agent finds it, relative to its working folder."""
        return f"{ATTACHMENTS_DIR}/{self.name}"

    @property
    def is_image(self) -> bool:
        return self.media_type in IMAGE_TYPES

    def content(self) -> bytes:
        return base64.b64decode(self.data)


@dataclass(frozen=True)
class LeftOut:
    """An attached file the agent does not get, and why (said to the person and the agent)."""

    name: str
    reason: str


def safe_name(name: str) -> str:
    """A file name that stays in its folder and reads in a shell: no path, no dot first."""
    base = unicodedata.normalize("NFC", name.replace("\\", "/").rsplit("/", 1)[-1])
    cleaned = _UNSAFE.sub("_", base).strip("._") or "file"
    stem, dot, ext = cleaned.rpartition(".")
    return cleaned[:120] if not dot else f"{stem[:100]}.{ext[:19]}"


def attachment(name: str, media_type: str, content: bytes, taken: Sequence[str] = ()) -> Attachment:
    """An attachment of ``content``, named apart from those ``taken`` (``log.txt``,
    ``log-2.txt``, ...)."""
    wanted = safe_name(name)
    stem, dot, ext = wanted.rpartition(".")
    stem, ext = (stem, dot + ext) if dot else (wanted, "")
    chosen, n = wanted, 2
    while chosen in taken:
        chosen, n = f"{stem}-{n}{ext}", n + 1
    data = base64.b64encode(content).decode("ascii")
    return Attachment(chosen, media_type, data, len(content))


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def shown_images(attachments: Sequence[Attachment]) -> tuple[Attachment, ...]:
    """The images the model is shown: each within the API's size limit, in order, while the
    whole stays within the request's."""
    shown: list[Attachment] = []
    total = 0
    for item in attachments:
        encoded = len(item.data)
        if item.is_image and encoded <= MODEL_IMAGE_MAX_BYTES:
            if total + encoded > MODEL_IMAGES_MAX_BYTES:
                continue
            shown.append(item)
            total += encoded
    return tuple(shown)


def attachment_note(attachments: Sequence[Attachment], left_out: Sequence[LeftOut] = ()) -> str:
    """What the prompt says of the attachments: where each file is, which images are shown,
    and what was left out; "" when there is nothing to say."""
    lines: list[str] = []
    shown = set(shown_images(attachments))
    if attachments:
        files = []
        for item in attachments:
            how = (
                ", shown to you above"
                if item in shown
                else (", too large to show you as an image" if item.is_image else "")
            )
            files.append(f"{item.path} ({human_size(item.size)}{how})")
        lines.append("Files attached: " + ", ".join(files))
    if left_out:
        lines.append(
            "Left out (you do not have them): "
            + "; ".join(f"{item.name} ({item.reason})" for item in left_out)
        )
    return "\n".join(lines)


def with_note(prompt: str, note: str) -> str:
    return f"{prompt}\n\n{note}" if note else prompt


def first_message(prompt: str, attachments: Sequence[Attachment]) -> dict[str, Any]:
    """The agent's first message as the SDK streams it: the images shown to the model, then
    the prompt's text (the order the Messages API recommends)."""
    blocks: list[dict[str, Any]] = [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": item.media_type, "data": item.data},
        }
        for item in shown_images(attachments)
    ]
    blocks.append({"type": "text", "text": prompt})
    return {
        "type": "user",
        "message": {"role": "user", "content": blocks},
        "parent_tool_use_id": None,
    }


async def _one(message: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    yield message


def prompt_input(
    prompt: str, attachments: Sequence[Attachment]
) -> str | AsyncIterator[dict[str, Any]]:
    """What ``ClaudeSDKClient.query`` takes: the text alone, or a message with images."""
    if not shown_images(attachments):
        return prompt
    return _one(first_message(prompt, attachments))


def write_attachments(folder: Path, attachments: Sequence[Attachment]) -> None:
    """Writes each attachment's exact bytes into ``folder/.attachments`` (atomically: a file
    is there whole or not at all), with the ``.gitignore`` that keeps them out of git.
    The folder is the agent's: every name is made and written by handle, none followed (a
    link an earlier agent put at ``.attachments`` is replaced, what it leads to untouched).
    Blocking; BoundaryError (or OSError) when a name cannot be written."""
    if not attachments:
        return
    with Folder.open(folder) as opened:
        make_folders(opened, (ATTACHMENTS_DIR,))
        _keep_out_of_git(opened)
        for item in attachments:
            write_file(opened, (ATTACHMENTS_DIR, item.name), item.content(), mode=_MODE)


def keep_out_of_git(folder: Path) -> None:
    """Writes again the ``.gitignore`` of ``folder/.attachments`` when that folder is there
    (its agent may have removed or changed it): called before the harness commits a writer's
    work. Nothing is followed: a link at ``.attachments`` is no such folder, a link at the
    ``.gitignore`` is replaced. Blocking."""
    with Folder.open(folder) as opened:
        if entry_kind(opened, (ATTACHMENTS_DIR,)) == "folder":
            _keep_out_of_git(opened)


def _keep_out_of_git(folder: Folder) -> None:
    ignore = (ATTACHMENTS_DIR, ".gitignore")
    wanted = _GITIGNORE.encode("utf-8")
    try:
        if read_file(folder, ignore, len(wanted)) == wanted:
            return
    except BoundaryError:  # gone, a link, a folder, changed: written again
        pass
    write_file(folder, ignore, wanted, mode=_MODE)
