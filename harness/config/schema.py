"""config.yaml's schema: what each key may hold, its default and an example.

pydantic parses the file into these models; ``harness.config.settings`` turns them into the frozen
settings the rest of the harness uses. Each section has a module of its own (``*_schema``, its
model and the settings it becomes); this one assembles them, with the few top-level keys and
the checks across sections. Strict types and unknown keys refused: ``section``. Each field
declares its example once; every message about that field reuses it.
"""

from __future__ import annotations

from typing import Self

import pydantic
from pydantic import Field

from harness.config.forge_schema import GitHubSection
from harness.config.limits_schema import LimitsSection
from harness.config.mcp_schema import McpSection
from harness.config.mcp_server_schema import McpServerSection
from harness.config.metadata_schema import MetadataEntry
from harness.config.repository_schema import unknown_repository_error
from harness.config.routines_schema import RoutineEntry, check_names
from harness.config.routing_schema import RuleEntry
from harness.config.runtime_schema import RuntimeSection
from harness.config.sandbox_schema import SandboxSection
from harness.config.section import Section
from harness.config.slack_schema import SlackSection
from harness.config.spares_schema import Spares, check_spare_counts
from harness.config.store_schema import StoreSection, check_store
from harness.config.workspaces_schema import WorkspacesSection
from harness.problems import Invalid, NonEmptyStr


class _Context(Section):
    budget_chars: int = Field(24_000, alias="budgetChars", ge=1, examples=[24_000])


class _AskHuman(Section):
    timeout_seconds: float = Field(
        900.0, alias="timeoutSeconds", gt=0, examples=[900], description="seconds"
    )


class ConfigFile(Section):
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
    routing: list[RuleEntry] = Field([], examples=[[{"pattern": "^review\\b", "role": "reviewer"}]])
    context: _Context = Field(default_factory=lambda: _Context.model_validate({}))
    ask_human: _AskHuman = Field(
        default_factory=lambda: _AskHuman.model_validate({}), alias="askHuman"
    )
    mcp: McpSection = Field(default_factory=lambda: McpSection.model_validate({}))
    limits: LimitsSection = Field(default_factory=lambda: LimitsSection.model_validate({}))
    metadata: dict[NonEmptyStr, MetadataEntry] = Field(
        {}, examples=[{"git_branch": {"command": "git rev-parse --abbrev-ref HEAD"}}]
    )
    slack: SlackSection = Field(default_factory=lambda: SlackSection.model_validate({}))
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
    runtime: RuntimeSection = Field(default_factory=lambda: RuntimeSection.model_validate({}))
    store: StoreSection = Field(default_factory=lambda: StoreSection.model_validate({}))
    sandbox: SandboxSection = Field(default_factory=lambda: SandboxSection.model_validate({}))
    github: GitHubSection = Field(default_factory=lambda: GitHubSection.model_validate({}))
    spares: Spares | None = Field(
        None,
        examples=[
            {"developer": 1},
            {"developer": 1, "reviewer": {"web": 1}, "maxIdle": 4, "maxMemoryMb": 1024},
        ],
        description="agents started ahead per role, in the workspace a new task gets by "
        "default (the default repository's worktree, else a scratch folder), so a request "
        "starts at once (about 200 MB each); a mapping of repository names to counts keeps "
        "them in those repositories' worktrees instead; default: one of the default role; "
        "{} keeps none. Beside the roles, `maxIdle` caps the idle spares in all (default 8) "
        "and `maxMemoryMb` their resident memory (default 2048); no spare starts while "
        "agents queue for a slot",
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

    routines: list[RoutineEntry] = Field(
        [],
        examples=[[{"name": "nightly", "schedule": "0 2 * * *", "channel": "C0123456789"}]],
        description="tasks started on a schedule, a GitHub event or an HTTP call",
    )

    _spare_counts = pydantic.field_validator("spares", mode="before")(check_spare_counts)
    _routine_names = pydantic.field_validator("routines", mode="before")(check_names)

    @pydantic.model_validator(mode="after")
    def _routines_name_repositories(self) -> Self:
        known = sorted(self.workspaces.repositories)
        for index, routine in enumerate(self.routines):
            name = routine.repository
            if name is not None and name not in self.workspaces.repositories:
                instead = "leave `repository` out for the workspace a new task gets by default"
                error = unknown_repository_error(name, known, instead, at=())
                error.at = ("routines", index, "repository")
                raise error
            on_github = routine.on is not None and routine.on.github is not None
            if on_github and name and self.workspaces.repositories[name].github is None:
                raise Invalid(  # its events could never be told apart from others'
                    f"repository {name!r} has no `github:`, so no GitHub event names it",
                    fix=f"add `github: OWNER/NAME` to workspaces.repositories.{name}, or leave "
                    "`repository` out to take the events of every repository",
                    at=("routines", index, "repository"),
                )
        return self

    @pydantic.model_validator(mode="after")
    def _store_has_a_server(self) -> Self:
        check_store(self.store, self.runtime)
        return self

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
                    raise unknown_repository_error(name, known, instead, at=("spares", role, name))
        return self
