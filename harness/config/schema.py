"""config.yaml's schema: what each key may hold, its default and an example.

pydantic parses the file into these models; ``harness.config.settings`` turns them into the frozen
settings the rest of the harness uses. Strict types: YAML's "3" is not an integer and `true`
is not a number; unknown keys are errors, so a typo never leaves a setting at its default
unnoticed. Each field declares its example once; every message about that field reuses it.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self

import pydantic
from pydantic import Field

from harness.config.forge_schema import GitHubSection, RepositoryGitHub
from harness.config.mcp_server_schema import McpServerSection
from harness.config.sandbox_schema import SandboxSection
from harness.config.spares_schema import Spares, check_spare_counts
from harness.problems import Invalid, NonEmptyStr, did_you_mean

_SLACK_ID = "U012ABCDEF"


class _Section(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


class _Rule(_Section):
    pattern: NonEmptyStr = Field(
        examples=["^review\\b"],
        description="a Python regex, matched case-insensitively at the start of the message",
    )
    role: NonEmptyStr = Field(examples=["reviewer"], description="the role that answers")

    @pydantic.field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value, re.IGNORECASE)
        except re.error as exc:
            raise Invalid(
                f"invalid regular expression {value!r}: {exc}",
                fix="fix the regex (Python `re` syntax; in YAML single quotes keep backslashes "
                "as written)",
                with_example=True,
            ) from exc
        return value


class _Context(_Section):
    budget_chars: int = Field(24_000, alias="budgetChars", ge=1, examples=[24_000])


class _AskHuman(_Section):
    timeout_seconds: float = Field(
        900.0, alias="timeoutSeconds", gt=0, examples=[900], description="seconds"
    )


class _Mcp(_Section):
    tool_timeout_ms: int = Field(600_000, alias="toolTimeoutMs", ge=1, examples=[600_000])
    full_access_categories: list[NonEmptyStr] = Field(
        ["conversational"],
        alias="fullAccessCategories",
        examples=[["conversational"]],
        description="role categories that get every harness tool",
    )
    allow: dict[NonEmptyStr, list[NonEmptyStr]] = Field(
        {},
        examples=[{"worker": ["mcp__harness__show_agent"]}],
        description="extra tool-name globs per role category",
    )
    deny: dict[NonEmptyStr, list[NonEmptyStr]] = Field(
        {},
        examples=[{"conversational": ["mcp__harness__kill_agent"]}],
        description="tool-name globs taken away per role category",
    )
    all_tasks_categories: list[NonEmptyStr] = Field(
        [],
        alias="allTasksCategories",
        examples=[["coordinator"]],
        description="role categories whose agents see and act on every task, not only their own",
    )
    # 0 is meaningful: agents may not draft agents at all.
    max_depth: int = Field(3, alias="maxDepth", ge=0, examples=[3])
    max_concurrent_agents: int = Field(4, alias="maxConcurrentAgents", ge=1, examples=[4])
    task_budget_usd: float | None = Field(
        None, alias="taskBudgetUsd", gt=0, examples=[5.0], description="null for no cap"
    )


class _Metadata(_Section):
    command: NonEmptyStr = Field(
        examples=["git rev-parse --abbrev-ref HEAD"],
        description="the shell command whose output is the value",
    )
    description: str | None = Field("", examples=["Current branch"])
    timeout_seconds: float = Field(5.0, alias="timeoutSeconds", gt=0, examples=[5])
    # Seed 001 spells the flag include_in_list; camelCase is accepted too, like everywhere else.
    include_in_list: bool = Field(
        False,
        validation_alias=pydantic.AliasChoices("include_in_list", "includeInList"),
        examples=[True],
    )


# Slack ids, not names: a user id starts U (W on Enterprise Grid), a channel id C, G (an old
# private channel) or D (a direct message); the rest is uppercase letters and digits.
_USER_ID = re.compile(r"^[UW][A-Z0-9]+$")
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]+$")
_FIND_USER_ID = (
    "write the member id, e.g. `U012ABCDEF`, not a name or email: in Slack open the person's "
    "profile > ⋮ (More) > Copy member ID"
)
_FIND_CHANNEL_ID = (
    "write the channel id, e.g. `C012ABCDEF`, not its name: in Slack open the channel's "
    "details (click its name); the id is at the bottom of the About tab"
)


def _user_id(value: str) -> str:
    if not _USER_ID.match(value):
        raise Invalid(f"{value!r} is not a Slack user id", fix=_FIND_USER_ID)
    return value


def _channel_id(value: str) -> str:
    if not _CHANNEL_ID.match(value):
        raise Invalid(f"{value!r} is not a Slack channel id", fix=_FIND_CHANNEL_ID)
    return value


UserId = Annotated[str, pydantic.AfterValidator(_user_id)]
ChannelId = Annotated[str, pydantic.AfterValidator(_channel_id)]


class _SlackFiles(_Section):
    max_bytes: int = Field(
        10 * 1024 * 1024,
        alias="maxBytes",
        ge=1,
        examples=[10_485_760],
        description="bytes: the largest file a request may attach or an agent may share",
    )
    max_count: int = Field(
        10,
        alias="maxCount",
        ge=0,
        examples=[10],
        description="files per message (0: attached files are left out)",
    )


class _Slack(_Section):
    allowed_users: list[UserId] = Field(
        [], alias="allowedUsers", examples=[[_SLACK_ID]], description="empty: everyone"
    )
    allowed_channels: list[ChannelId] = Field(
        [], alias="allowedChannels", examples=[["C012ABCDEF"]], description="empty: every channel"
    )
    admins: list[UserId] = Field(
        [],
        examples=[[_SLACK_ID]],
        description="decide any task's approvals, stop any agent and see every task",
    )
    files: _SlackFiles = Field(default_factory=lambda: _SlackFiles.model_validate({}))


# Repository names become folder names and the `repo:NAME` token people type: plain words.
_REPOSITORY_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# What git's check-ref-format refuses in a branch name; a leading "-" would read as an option.
_BAD_BRANCH = re.compile(r"^[-/.]|[\s~^:?*\[\\]|\.\.|@\{|//|/\.|[/.]$|\.lock$")


def _repository_name(value: str) -> str:
    if not _REPOSITORY_NAME.match(value):
        plain = re.sub(r"[^a-z0-9_-]+", "-", value.lower()).strip("-_")[:64]
        hint = f"did you mean {plain!r}? " if _REPOSITORY_NAME.match(plain) else ""
        raise Invalid(
            f"invalid repository name {value!r}",
            fix=f"{hint}use lowercase letters, digits, `-` and `_` (at most 64, starting with a "
            "letter or digit)",
            with_example=True,
        )
    return value


def _branch_name(value: str) -> str:
    if _BAD_BRANCH.search(value):
        raise Invalid(
            f"{value!r} is not a valid git branch name",
            fix="name an existing branch of the repository",
            with_example=True,
        )
    return value


def _not_an_option(value: str) -> str:
    if value.startswith("-"):  # git would read it as an option
        raise Invalid(f"{value!r} starts with '-'", fix="write the address", with_example=True)
    return value


RepositoryName = Annotated[str, pydantic.AfterValidator(_repository_name)]
BranchName = Annotated[NonEmptyStr, pydantic.AfterValidator(_branch_name)]
GitUrl = Annotated[NonEmptyStr, pydantic.AfterValidator(_not_an_option)]


def _unknown_repository(
    name: str, known: list[str], instead: str, *, at: tuple[str, ...]
) -> Invalid:
    """A name that is not one of ``workspaces.repositories`` (``known``); ``instead``: the
    other way out, said after naming one of them."""
    return Invalid(
        f"unknown repository {name!r}; known repositories: "
        f"{', '.join(known) or '(none configured)'}",
        fix=f"{did_you_mean(name, known)}name one of `workspaces.repositories`, or {instead}",
        at=at,
    )


class RepositoryEntry(_Section):
    path: NonEmptyStr | None = Field(
        None, examples=["../web"], description="a local git repository; tasks get worktrees of it"
    )
    url: GitUrl | None = Field(
        None,
        examples=["https://git.example.com/api.git"],
        description="a repository the harness clones into `cache` and fetches for each new task",
    )
    cache: NonEmptyStr | None = Field(
        None,
        examples=[".agents/repos/api"],
        description="where the clone of `url` is kept; default <root>/.repos/<name>",
    )
    base_branch: BranchName = Field(
        "main", alias="baseBranch", examples=["main"], description="what task branches start from"
    )
    remote: NonEmptyStr = Field(
        "origin",
        examples=["origin"],
        description="the git remote a `path` repository's task branches are pushed to",
    )
    github: RepositoryGitHub | None = Field(
        None,
        examples=["acme/web"],
        description="open pull requests of this repository's tasks on GitHub",
    )

    @pydantic.model_validator(mode="after")
    def _one_source(self) -> Self:
        either = "`path:` (a local git repository) or `url:` (one the harness clones)"
        if self.path is not None and self.url is not None:
            raise Invalid("sets both `path` and `url`", fix=f"keep only one: {either}")
        if self.path is None and self.url is None:
            raise Invalid(
                "needs `path` or `url`",
                fix=f"add {either}, e.g. `{{path: ../web}}` or "
                "`{url: 'https://git.example.com/api.git'}`",
            )
        if self.path is not None and self.cache is not None:
            raise Invalid(
                "`cache` is only for a `url` repository",
                fix="remove `cache:`: a `path` repository is used where it is",
                at=("cache",),
            )
        return self


class WorkspacesSection(_Section):
    root: NonEmptyStr = Field(
        ".agents/workspaces",
        examples=[".agents/workspaces"],
        description="where each task's worktree or scratch folder is made",
    )
    prune_after_days: float = Field(
        14,
        alias="pruneAfterDays",
        gt=0,
        examples=[14],
        description="`prune` removes the workspaces of tasks idle longer than this",
    )
    commit_work: bool = Field(
        True,
        alias="commitWork",
        examples=[True],
        description="commit a writing agent's uncommitted work on the task's branch when it ends",
    )
    default: NonEmptyStr | None = Field(
        None, examples=["web"], description="the repository when a message names none"
    )
    channels: dict[ChannelId, NonEmptyStr] = Field(
        {}, examples=[{"C0123ABCD": "api"}], description="a default repository per channel id"
    )
    repositories: dict[RepositoryName, RepositoryEntry] = Field(
        {}, examples=[{"web": {"path": "../web"}}]
    )

    @pydantic.model_validator(mode="after")
    def _names_are_repositories(self) -> Self:
        named: list[tuple[tuple[str, ...], str]] = []
        if self.default is not None:
            named.append((("default",), self.default))
        named += [(("channels", channel), name) for channel, name in self.channels.items()]
        known = sorted(self.repositories)
        for at, name in named:
            if name not in self.repositories:
                instead = f"add it there, e.g. `{name}: {{path: ../{name}}}`"
                raise _unknown_repository(name, known, instead, at=at)
        return self


class _Runtime(_Section):
    kind: Literal["local", "nats"] = Field(
        "local", examples=["nats"], description="`local` (this machine) or `nats` (workers)"
    )
    url: NonEmptyStr | None = Field(
        None, examples=["nats://127.0.0.1:4222"], description="the NATS server, for `nats`"
    )
    credentials: NonEmptyStr | None = Field(
        None, examples=["nats.creds"], description="a NATS credentials file (JWT and seed)"
    )
    tls_ca: NonEmptyStr | None = Field(
        None, alias="tlsCa", examples=["ca.pem"], description="the CA of the server's TLS cert"
    )
    prefix: NonEmptyStr = Field(
        "harness",
        pattern=r"^[A-Za-z0-9_-]+$",
        examples=["harness"],
        description="subject and stream prefix, one per installation",
    )
    lost_after_seconds: float = Field(
        10,
        alias="lostAfterSeconds",
        gt=0,
        examples=[10],
        description="a worker silent this long is lost; its agent ends interrupted",
    )

    @pydantic.model_validator(mode="after")
    def _nats_has_a_url(self) -> Self:
        if self.kind == "nats" and self.url is None:
            raise ValueError("`kind: nats` needs the server's `url`, e.g. nats://127.0.0.1:4222")
        return self


class ConfigFile(_Section):
    roles: NonEmptyStr = Field("roles", examples=["roles"], description="the roles folder")
    tasks: NonEmptyStr = Field(
        ".agents/tasks", examples=[".agents/tasks"], description="the task store's folder"
    )
    prune_tasks_after_days: float | None = Field(
        None,
        alias="pruneTasksAfterDays",
        gt=0,
        examples=[90],
        description="`harness prune-tasks` deletes tasks idle longer than this; null keeps them",
    )
    model_api_retries: int = Field(
        10,
        alias="modelApiRetries",
        ge=0,
        le=15,  # the CLI clamps CLAUDE_CODE_MAX_RETRIES to 15: a higher value would lie
        examples=[10],
        description="retries of a failing model API call before the agent fails (0 to 15)",
    )
    default_role: NonEmptyStr = Field("developer", alias="defaultRole", examples=["developer"])
    routing: list[_Rule] = Field([], examples=[[{"pattern": "^review\\b", "role": "reviewer"}]])
    context: _Context = Field(default_factory=lambda: _Context.model_validate({}))
    ask_human: _AskHuman = Field(
        default_factory=lambda: _AskHuman.model_validate({}), alias="askHuman"
    )
    mcp: _Mcp = Field(default_factory=lambda: _Mcp.model_validate({}))
    metadata: dict[NonEmptyStr, _Metadata] = Field(
        {}, examples=[{"git_branch": {"command": "git rev-parse --abbrev-ref HEAD"}}]
    )
    slack: _Slack = Field(default_factory=lambda: _Slack.model_validate({}))
    workspaces: WorkspacesSection = Field(
        default_factory=lambda: WorkspacesSection.model_validate({})
    )
    withhold_env: list[NonEmptyStr] = Field(
        [],
        alias="withholdEnv",
        examples=[[]],
        description="no longer used: agents get an allow-list of environment variables "
        "(`sandbox.passEnv` adds to it), so there is nothing to withhold; remove it",
    )
    runtime: _Runtime = Field(default_factory=lambda: _Runtime.model_validate({}))
    sandbox: SandboxSection = Field(default_factory=lambda: SandboxSection.model_validate({}))
    github: GitHubSection = Field(default_factory=lambda: GitHubSection.model_validate({}))
    spares: Spares | None = Field(
        None,
        examples=[{"developer": 1}, {"developer": 1, "reviewer": {"web": 1}}],
        description="agents started ahead per role, in the workspace a new task gets by "
        "default (the default repository's worktree, else a scratch folder), so a request "
        "starts at once (about 200 MB each); a mapping of repository names to counts keeps "
        "them in those repositories' worktrees instead; default: one of the default role; "
        "{} keeps none",
    )
    follow_up_spares: int = Field(
        1,
        alias="followUpSpares",
        ge=0,
        le=8,
        examples=[1],
        description="tasks last worked on whose next follow-up has a spare waiting in the "
        "task's folder or worktree (about 200 MB each); 0 keeps none",
    )
    mcp_server: McpServerSection = Field(
        default_factory=lambda: McpServerSection.model_validate({}), alias="mcpServer"
    )

    _spare_counts = pydantic.field_validator("spares", mode="before")(check_spare_counts)

    @pydantic.model_validator(mode="after")
    def _no_secret_passed(self) -> Self:
        secrets = {
            entry.token_env: f"the bearer token of {entry.user} for `harness mcp`"
            for entry in self.mcp_server.tokens
            if entry.token_env is not None
        }
        for name, repo in self.workspaces.repositories.items():
            if repo.github is not None:
                secrets[repo.github.token_env] = f"the GitHub token of repository {name}"
        try:
            self.sandbox.check_secrets(secrets)
        except Invalid as exc:
            exc.at = ("sandbox", *exc.at)
            raise
        return self

    @pydantic.model_validator(mode="after")
    def _spares_name_repositories(self) -> Self:
        known = sorted(self.workspaces.repositories)
        for role, counts in (self.spares or {}).items():
            for name in counts if isinstance(counts, dict) else {}:
                if name not in self.workspaces.repositories:
                    instead = (
                        f"give a count for the workspace a new task gets by default: `{role}: 1`"
                    )
                    raise _unknown_repository(name, known, instead, at=("spares", role, name))
        return self
