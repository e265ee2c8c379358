"""config.yaml's ``routines:``: tasks the harness starts by itself, each on one trigger (a
cron schedule in a time zone, a GitHub event, or a call over HTTP with a token), posted in a
channel of their own and run with their owner's rights; and the settings they become.

``on:`` is read as written, though a YAML 1.1 reader (PyYAML) takes a bare ``on`` key for
``true``: both keys mean the same here. Cross-checks against other sections (the repository
is configured) are ``schema.py``'s; the role exists and the token variable is set are checked
when the roles and the environment are known (``check_routines``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic
from pydantic import Field

from harness.config.cron import Cron, parse_cron
from harness.config.env_name import SHELL_NAME
from harness.config.section import Section
from harness.config.slack_ids import ChannelId, UserId
from harness.errors import ConfigError
from harness.problems import Invalid, NonEmptyStr

ROUTINE_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
# GitHub's event, optionally with its action: `pull_request.opened`, `push`.
_EVENT = re.compile(r"^[a-z_]+(?:\.[a-z_]+)?$")
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_DURATION_FIX = "write a duration such as `30m`, `2h`, `1h30m`, `1d` or `0s` (never catch up)"
Overlap = Literal["skip", "queue"]
DEFAULT_CATCH_UP = timedelta(minutes=15)


def parse_duration(text: str) -> timedelta:
    """``30m``, ``2h``, ``1h30m``, ``1d``, ``45s``, ``0`` as a timedelta; Invalid otherwise."""
    match = _DURATION.match(text.strip())
    if text.strip() in ("0", ""):
        return timedelta(0)
    if match is None or not any(match.groups()):
        raise Invalid(f"{text!r} is not a duration", fix=_DURATION_FIX)
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


class _Http(Section):
    token_env: str = Field(
        alias="tokenEnv",
        pattern=SHELL_NAME.pattern,
        examples=["DEPLOY_HOOK_TOKEN"],
        description="the environment variable holding the bearer token callers send",
    )


class _On(Section):
    github: list[str] | None = Field(
        None,
        min_length=1,
        examples=[["pull_request.opened", "pull_request.ready_for_review"]],
        description="GitHub events (`event` or `event.action`) delivered to /github/webhook",
    )
    http: _Http | None = Field(None, description="`POST /routines/<name>` with a bearer token")

    @pydantic.field_validator("github")
    @classmethod
    def _events(cls, value: list[str] | None) -> list[str] | None:
        for index, event in enumerate(value or ()):
            if not _EVENT.match(event):
                raise Invalid(
                    f"{event!r} is not a GitHub event name",
                    fix="write GitHub's event, with its action after a dot: "
                    "`pull_request.opened`, `issues.labeled`, `push`",
                    at=(index,),
                )
        return value

    @pydantic.model_validator(mode="after")
    def _one(self) -> Self:
        if (self.github is None) == (self.http is None):
            raise Invalid(
                "needs exactly one of `github` and `http`",
                fix="write `on: {github: [pull_request.opened]}` or "
                "`on: {http: {tokenEnv: DEPLOY_HOOK_TOKEN}}`",
            )
        return self


class RoutineEntry(Section):
    name: str = Field(examples=["nightly-flaky"], description="lowercase letters, digits, dashes")
    schedule: NonEmptyStr | None = Field(
        None, examples=["0 2 * * 1-5"], description="five-field cron: when it fires"
    )
    timezone: NonEmptyStr = Field(
        "UTC", examples=["Europe/Paris"], description="the schedule's IANA time zone"
    )
    on: _On | None = Field(None, description="fired by a GitHub event or an HTTP call")
    channel: ChannelId = Field(
        examples=["C0123456789"], description="each run's thread starts in this channel"
    )
    owner: UserId | None = Field(
        None,
        examples=["U0123456789"],
        description="whose rights its runs have; approvals go to them and the admins",
    )
    role: NonEmptyStr = Field(examples=["developer"])
    repository: NonEmptyStr | None = Field(None, examples=["web"])
    prompt: NonEmptyStr = Field(
        examples=["Find the flakiest test of the last day and fix it."],
        description="what the agent is asked; `{field.sub}` takes a field of the event",
    )
    budget_usd: float | None = Field(
        None, alias="budgetUsd", gt=0, examples=[3], description="within the task budget"
    )
    overlap: Overlap = Field(
        "skip", examples=["skip"], description="a firing while its last run works"
    )
    disable_after_failures: int = Field(3, alias="disableAfterFailures", ge=1, le=100, examples=[3])
    catch_up: str = Field(
        "15m",
        alias="catchUp",
        examples=["30m"],
        description="a firing missed while the bot was down runs at start if this recent",
    )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _on_key(cls, value: object) -> object:
        # PyYAML reads a bare `on:` key as the boolean true.
        if isinstance(value, dict) and True in value:
            value = {("on" if key is True else key): item for key, item in value.items()}
        return value

    @pydantic.field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not ROUTINE_NAME.match(value):
            raise Invalid(
                f"{value!r} is not a routine name",
                fix="use lowercase letters, digits and dashes, e.g. `nightly-flaky`",
            )
        return value

    @pydantic.field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            parse_cron(value)
        return value

    @pydantic.field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise Invalid(
                f"unknown time zone {value!r}",
                fix="write an IANA time zone name, e.g. `Europe/Paris`, `America/New_York` "
                "or `UTC`",
            ) from None
        return value

    @pydantic.field_validator("catch_up")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration(value)
        return value

    @pydantic.model_validator(mode="after")
    def _one_trigger(self) -> Self:
        if (self.schedule is None) == (self.on is None):
            raise Invalid(
                "needs exactly one trigger: `schedule` or `on`",
                fix='write `schedule: "0 2 * * 1-5"`, or `on: {github: [pull_request.opened]}`, '
                "or `on: {http: {tokenEnv: DEPLOY_HOOK_TOKEN}}`",
            )
        return self


def check_names(value: object) -> object:
    """Each routine's name once (``routines:`` as written; pydantic checks the rest)."""
    seen: set[object] = set()
    for index, entry in enumerate(value if isinstance(value, list) else ()):
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name in seen:
            raise Invalid(
                f"the routine name {name!r} is used twice",
                fix="give each routine a name of its own",
                at=(index, "name"),
            )
        seen.add(name)
    return value


TriggerKind = Literal["schedule", "github", "http"]


@dataclass(frozen=True)
class Routine:
    name: str
    kind: TriggerKind
    channel: str
    role: str
    prompt: str
    owner: str | None = None
    repository: str | None = None
    schedule: Cron | None = None
    timezone: str = "UTC"
    events: tuple[str, ...] = ()  # on github: `pull_request.opened`, `push`
    token_env: str | None = None  # on http
    budget_usd: float | None = None
    overlap: Overlap = "skip"
    disable_after_failures: int = 3
    catch_up: timedelta = DEFAULT_CATCH_UP

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def trigger_text(self) -> str:
        """The trigger in a few words: ``0 2 * * 1-5 (Europe/Paris)``."""
        if self.schedule is not None:
            return f"schedule {self.schedule.expression} ({self.timezone})"
        if self.kind == "github":
            return "GitHub " + ", ".join(self.events)
        return f"HTTP POST /routines/{self.name}"


def routine_settings(raw: Sequence[RoutineEntry]) -> tuple[Routine, ...]:
    def one(entry: RoutineEntry) -> Routine:
        on = entry.on
        kind: TriggerKind = "schedule" if on is None else "github" if on.github else "http"
        return Routine(
            name=entry.name,
            kind=kind,
            channel=entry.channel,
            role=entry.role,
            prompt=entry.prompt,
            owner=entry.owner,
            repository=entry.repository,
            schedule=parse_cron(entry.schedule) if entry.schedule else None,
            timezone=entry.timezone,
            events=tuple(on.github or ()) if on is not None else (),
            token_env=on.http.token_env if on is not None and on.http is not None else None,
            budget_usd=entry.budget_usd,
            overlap=entry.overlap,
            disable_after_failures=entry.disable_after_failures,
            catch_up=parse_duration(entry.catch_up),
        )

    return tuple(one(entry) for entry in raw)


def check_routines(
    routines: Sequence[Routine],
    roles: Sequence[str],
    environ: Mapping[str, str] | None,
    *,
    file: Path,
) -> None:
    """What config.yaml alone cannot say, checked at start: each routine's role exists and,
    given the ``environ`` of a process that serves the triggers, each HTTP trigger's token
    variable holds a token. A ConfigError naming the routine."""
    known = ", ".join(sorted(roles)) or "(none)"
    for index, routine in enumerate(routines):
        if routine.role not in roles:
            raise ConfigError(
                str(file),
                f"routines[{index}].role",
                f"unknown role {routine.role!r} (routine {routine.name}); known roles: {known}",
                fix=f"use one of the known roles ({known}) or add roles/{routine.role}.md",
            )
        if environ is None or routine.token_env is None:
            continue
        found = environ.get(routine.token_env, "").strip()
        if len(found) < 16:
            raise ConfigError(
                str(file),
                f"routines[{index}].on.http.tokenEnv",
                f"${routine.token_env} is {'shorter than 16 characters' if found else 'not set'} "
                f"(the token of routine {routine.name})",
                fix=f"export {routine.token_env}=... (make one with `openssl rand -hex 32`) "
                "before starting the bot",
            )
