"""One error tree for the harness: every failure a user can cause names what and how to fix it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

if TYPE_CHECKING:
    from harness.problems import Problem


class HarnessError(Exception):
    """Base of every error the harness raises on purpose.

    ``message`` says what went wrong, ``fix`` says what to do about it.
    """

    def __init__(self, message: str, *, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message}\n  fix: {self.fix}" if self.fix else self.message


class FileFieldError(HarnessError):
    """A file the user edits (config.yaml, a role file) is invalid: the error names the file,
    the field path as written there, what is wrong and how to fix it.

    ``also`` lists further problems in the same file (``"field: problem"`` lines), so one
    run shows every typo instead of one per attempt.
    """

    def __init__(
        self, file: str, field: str, problem: str, *, fix: str, also: Sequence[str] = ()
    ) -> None:
        super().__init__(f"{file}: {field}: {problem}", fix=fix)
        self.file = file
        self.field = field
        self.problem = problem
        self.also = tuple(also)

    @classmethod
    def from_problems(cls, file: str, problems: Sequence[Problem]) -> Self:
        """The first problem as the error, the rest listed under ``also``."""
        first, *rest = problems
        return cls(
            file,
            first.path,
            first.problem,
            fix=first.fix,
            also=[f"{p.path}: {p.problem} (fix: {p.fix})" for p in rest],
        )

    def __str__(self) -> str:
        more = "".join(f"\n  also: {line}" for line in self.also)
        return super().__str__() + more


class ConfigError(FileFieldError):
    """config.yaml is missing, unreadable or invalid."""


class RoleError(FileFieldError):
    """A file in roles/ is invalid."""


class UnknownRoleError(HarnessError):
    def __init__(self, role: str, known: Sequence[str]) -> None:
        listed = ", ".join(sorted(known)) or "(none)"
        super().__init__(
            f"unknown role {role!r}; known roles: {listed}",
            fix="use one of the known roles, or add roles/<name>.md",
        )
        self.role = role
        self.known = tuple(sorted(known))


class TaskNotFoundError(HarnessError):
    def __init__(self, slug: str) -> None:
        super().__init__(
            f"no task {slug!r}", fix="run `harness tasks` to list the existing task slugs"
        )
        self.slug = slug


def repair_command(slug: str) -> str:
    """What to run to repair a damaged task (see ``TaskDamagedError``)."""
    return f"harness repair {slug}"


class TaskDamagedError(HarnessError):
    """The task's folder and task.json are there, but task.json cannot be read or parsed.

    The task is not lost: nothing overwrites the file (every write refuses), and
    ``harness repair SLUG`` sets it aside and writes a fresh one from what still reads.
    ``problem`` is what is wrong (without the file), ``by_hand`` the fix in the file itself.
    """

    def __init__(self, slug: str, file: str, problem: str, *, by_hand: str = "") -> None:
        fix = (
            f"run `{repair_command(slug)}` where the tasks folder is (the bot's machine): it "
            "keeps the damaged file as task.json.damaged-<time> and writes a fresh task.json "
            "with everything that still reads"
        )
        super().__init__(
            f"task {slug!r} cannot be read: {file}: {problem}",
            fix=f"{fix}; or {by_hand}" if by_hand else fix,
        )
        self.slug = slug
        self.file = file
        self.problem = problem
        self.by_hand = by_hand


class InvalidSlugError(HarnessError):
    def __init__(self, slug: str) -> None:
        super().__init__(
            f"invalid task slug {slug!r}",
            fix="a slug is lowercase letters, digits and hyphens, 1-64 chars, "
            "e.g. `add-a-settings-page`",
        )
        self.slug = slug


class AgentNotFoundError(HarnessError):
    def __init__(self, agent_id: str) -> None:
        super().__init__(f"no agent {agent_id!r}", fix="list the agents to find a valid agent id")
        self.agent_id = agent_id


class ToolError(HarnessError):
    """A harness MCP tool call that cannot be served; reaches the model as a tool error
    ``{"error": {"code", "message", "suggestion"}}``."""

    def __init__(self, code: str, message: str, suggestion: str) -> None:
        super().__init__(message, fix=suggestion)
        self.code = code
        self.suggestion = suggestion

    def to_json(self) -> dict[str, dict[str, str]]:
        return {
            "error": {"code": self.code, "message": self.message, "suggestion": self.suggestion}
        }


LimitCode = Literal["BUDGET_EXCEEDED", "DEPTH_LIMIT_EXCEEDED", "SPEND_LIMIT_EXCEEDED"]


class LimitError(HarnessError):
    """A dispatch the task's caps refuse, whoever asked for it: the task spent its budget, or
    agents drafting agents would nest too deep. ``code`` is the tool error code for agents."""

    def __init__(self, code: LimitCode, message: str, *, fix: str) -> None:
        super().__init__(message, fix=fix)
        self.code = code


class NotAllowedError(HarnessError):
    """Someone tried to decide for a task who may not: only the person who asked for it and
    the admins approve what its agents run, stop them or run them again."""

    def __init__(self, user: str, action: str, requester: str | None) -> None:
        who = f"the person who asked for it ({requester})" if requester else "its requester"
        super().__init__(
            f"{user} may not {action}: only {who} and the admins may",
            fix="ask them to, or ask an admin to add you to `slack.admins` in config.yaml",
        )
        self.user = user
        self.action = action
        self.requester = requester


class WorkspaceError(HarnessError):
    """A workspace could not be prepared, read or removed."""


class TamperedWorkspaceError(WorkspaceError):
    """A worktree's ``.git`` was changed or removed (by its agent, say) since the harness made
    it: the harness does not trust it with its own git. ``workspace`` is the task's
    ``Workspace`` (typed loosely: errors import no package)."""

    def __init__(self, workspace: Any, now: str | None, *, why: str | None = None) -> None:
        found = f"it names {now}" if now else "it is gone or unreadable"
        said = why or f"{found}, not {workspace.git_dir}"
        super().__init__(
            f"the .git of task {workspace.slug}'s worktree was changed ({said}): its work "
            "was neither read nor committed",
            fix=f"look at {workspace.path} before trusting it; the task's branch holds what "
            "was committed before",
        )


class SwitchedBranchError(TamperedWorkspaceError):
    """A worktree's HEAD was moved off its task's branch (its agent can write HEAD): the
    harness commits nothing there, which would land on another branch."""

    def __init__(self, workspace: Any, head: str | None) -> None:
        on = f"on {head}" if head else "on a detached HEAD"
        WorkspaceError.__init__(
            self,
            f"task {workspace.slug}'s worktree is {on}, not its branch {workspace.branch}: "
            "its work was neither read nor committed",
            fix=f"look at {workspace.path} before trusting it; the task's branch holds what "
            "was committed before",
        )


class GitError(WorkspaceError):
    """A git command failed; ``stderr`` is git's own explanation."""

    def __init__(self, args: tuple[str, ...], cwd: Path, stderr: str, *, fix: str) -> None:
        reason = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
        super().__init__(f"`git {' '.join(args)}` failed in {cwd}: {reason}", fix=fix)
        self.args_run = args
        self.stderr = stderr


ForgeFailure = Literal[
    "no-forge",  # the task's repository has no forge in config.yaml
    "no-branch",  # the task has no branch to push (no repository, nothing committed)
    "credentials",  # no token, or the forge refused it (401)
    "forbidden",  # the identity may not do it (403, a protected branch)
    "not-found",  # the repository (or pull request) is not there for this identity (404)
    "rejected",  # the forge refused what was sent (422), or git refused the push
    "rate-limited",  # try again later
    "unavailable",  # the forge or the remote could not be reached, or failed (5xx)
]


class ForgeError(HarnessError):
    """Pushing a task's branch, or a pull request on its forge, failed. ``failure`` says which
    way, ``status`` is the forge's HTTP status when it answered, ``retry_after`` how long it
    asked to be left alone (seconds), when it said."""

    def __init__(
        self,
        failure: ForgeFailure,
        message: str,
        *,
        fix: str,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, fix=fix)
        self.failure = failure
        self.status = status
        self.retry_after = retry_after
