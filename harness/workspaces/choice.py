"""Which repository a message is about: a pure function of the settings, the text, the channel.

A message names a repository with a ``repo:NAME`` token anywhere in it (``repo:web fix the
login``; the name matches case-insensitively). Without one, the channel's default repository
decides, then ``workspaces.default``, then the only repository when exactly one is configured.
With several configured and nothing deciding, the choice is ambiguous and the person is asked.

The text comes back without the token, so routing sees ``review this`` rather than
``repo:web review this``: route on :attr:`RepositoryChoice.text`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Literal

from harness.config.settings import WorkspaceSettings
from harness.problems import did_you_mean

logger = logging.getLogger(__name__)

# The token stands alone: not inside a word, a path or a URL ("http://x/repo:web" is no token),
# and a sentence's full stop or comma may follow it. The spaces around it are matched so that
# removing it leaves one space between the words it separated, or none at either end.
_TOKEN = re.compile(
    r"(?P<lead>[ \t]*)(?<![\w/:.-])repo:(?P<name>[A-Za-z0-9][A-Za-z0-9_-]*)"
    r"(?![\w/:-]|\.\w)(?P<trail>[ \t]*)",
    re.IGNORECASE,
)

ChoiceStatus = Literal["chosen", "none", "ambiguous", "unknown"]
ChoiceSource = Literal["message", "channel", "default", "only"]


@dataclass(frozen=True)
class RepositoryChoice:
    """The outcome, and the message text without its ``repo:NAME`` tokens.

    - ``chosen``: ``repository`` is the name and ``source`` says what decided;
    - ``none``: no repository is configured, the task gets a scratch folder;
    - ``ambiguous``: ``candidates`` are the repositories to pick from;
    - ``unknown``: the message named ``requested``, which is not configured; ``candidates``
      are the configured ones.
    """

    status: ChoiceStatus
    text: str
    repository: str | None = None
    source: ChoiceSource | None = None
    candidates: tuple[str, ...] = ()
    requested: str | None = None

    def explain(self) -> str | None:
        """What to tell the person when no repository could be chosen; None otherwise."""
        listed = ", ".join(f"repo:{name}" for name in self.candidates)
        if self.status == "ambiguous":
            return f"Which repository is this about? Add one of: {listed}."
        if self.status == "unknown":
            if not self.candidates:
                return f"No repository {self.requested!r}: no repositories are configured."
            hint = did_you_mean(self.requested or "", self.candidates)
            hint = hint[:1].upper() + hint[1:]
            return f"No repository {self.requested!r}. {hint}Known: {listed}."
        return None


def choose_repository(
    settings: WorkspaceSettings, text: str, channel: str | None = None
) -> RepositoryChoice:
    """The repository ``text`` (posted in ``channel``, a Slack channel id) is about."""
    known = tuple(sorted(settings.repositories))
    named: list[str] = []

    def remove(match: re.Match[str]) -> str:
        named.append(match["name"].lower())
        return " " if match["lead"] and match["trail"] else ""

    rest = _TOKEN.sub(remove, text).strip()
    if named:
        unknown = [name for name in named if name not in settings.repositories]
        if unknown:
            return RepositoryChoice("unknown", rest, candidates=known, requested=unknown[0])
        distinct = tuple(dict.fromkeys(named))
        if len(distinct) > 1:
            return RepositoryChoice("ambiguous", rest, source="message", candidates=distinct)
        return RepositoryChoice("chosen", rest, repository=distinct[0], source="message")
    if not known:
        return RepositoryChoice("none", rest)
    fallbacks: tuple[tuple[ChoiceSource, str | None], ...] = (
        ("channel", settings.channels.get(channel) if channel else None),
        ("default", settings.default),
        ("only", known[0] if len(known) == 1 else None),
    )
    for source, name in fallbacks:
        if name is not None and name in settings.repositories:
            return RepositoryChoice("chosen", rest, repository=name, source=source)
    return RepositoryChoice("ambiguous", rest, candidates=known)


def default_repository(settings: WorkspaceSettings) -> str | None:
    """The repository a new task gets when neither its message nor its channel names one
    (``workspaces.default``, else the only one configured): what spares are made in. None
    when no repository is configured (a scratch folder) or a person would be asked."""
    choice = choose_repository(settings, "")
    return choice.repository if choice.status == "chosen" else None
