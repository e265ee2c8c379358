"""Workspaces: the folder each task's agents work in, never the harness's own checkout.

With repositories configured (``workspaces:`` in config.yaml), a task gets a git worktree of
one of them on its own branch; without, a scratch folder. Two tasks never share a working tree.

API (all of it; the modules behind it are internal)::

    choose_repository(settings, text, channel) -> RepositoryChoice
        Pure: which repository a message is about (``repo:NAME``, the channel's default,
        ``default``, the only one), and the text without the token. Route on ``.text``.
    workspaces = Workspaces(config.workspaces)
    await workspaces.prepare(slug, repository: str | None) -> Workspace
        Creates the task's workspace, or returns the one it has (a follow-up). Run the agent
        with ``cwd=workspace.path`` and ``workspace.env`` added to its environment. A
        worktree whose repository vanished raises RepositoryGoneError (as do ``report`` and
        the sandbox's git view): it says what is missing, claims no branch, keeps the work.
    await workspaces.find(slug) -> Workspace | None        the task's workspace, if it has one
    await workspaces.commit(workspace, message, author=) -> str | None
        Commits the worktree's uncommitted work on its branch (``commitWork``).
    await workspaces.report(workspace, commit=message | None, author=) -> WorkReport | None
        Branch, head, diff stat and diff since the base (committing first with a message).
    await workspaces.changes(workspace) -> Changes | None   None for a scratch folder
    await workspaces.patch(workspace) -> str                everything changed since the base
    await workspaces.list() -> list[WorkspaceInfo]
    await workspaces.prune(older_than=None, keep=()) -> PruneReport
    workspaces.cli_state(slug, agent_id) -> Path   where a CLI outside the sandbox keeps its files

    Its parts, for what agents in the OS sandbox are shown (a caller takes the one it uses):

    sandbox_git = workspaces.sandbox_git                                  (``sandbox_git``)
    await sandbox_git.sandbox_view(workspace, writes=True) -> GitView | None
        What an agent's OS sandbox must show of the worktree's git: binds (the repository's
        git directory read-only) and env. None for a scratch folder. See ``git_view``.
    await sandbox_git.settle_sandbox_view(workspace)
        After a writer's sandboxed run, before ``commit``/``report``: brings the objects
        it made and its branch into the repository.
    folders = workspaces.sandbox_folders                              (``sandbox_folders``)
    await folders.view(folder) -> Path / await folders.drop_view(view)
        A path of a run's own (``.views/<id>``) its sandboxed agent is shown the folder at.
    await folders.shown_in_view(git_view, slug, view) -> GitView
        A worktree's ``sandbox_view`` as shown at such a path (the paths a spare's has).
    await folders.spare_folder(repository=None, writes=True) -> Path
        A folder made ahead for a spare agent at a view path: scratch, or a worktree of
        ``repository`` on a placeholder branch (``spare_worktrees``; ``spare_git(view)``
        is what its sandbox shows of its git). ``drop_view`` removes it all.
    await folders.adopt_spare(view, slug) -> Workspace | None
        The spare's folder becomes the new task's workspace; None when it does not fit
        (the task has one, or the base branch moved since the worktree was made).

The values, frozen dataclasses importable from here::

    Workspace(slug, path, repository, branch, base_commit), .env, .serves(repository)
        (a follow-up for ``repository`` may work in it as found: its repository still there)
    WorkspaceRequest(repository, url, path, base_branch, commit_work)   what a host is to make
    WorkReport(branch, head_commit, diff_stat, diff)                     where an agent's work is
    Changes(branch, head, base, commits, uncommitted, files), .summary()
    FileChange(path, status: added | modified | deleted | type changed, insertions, deletions)
    WorkspaceInfo(slug, path, kind: worktree | scratch, repository, branch, modified,
                  uncommitted, problem)
    PruneReport(removed: Removed(slug, patch)..., kept: Kept(slug, reason, detail)...,
                patches), reason: in use | recent | failed
    GitView(binds: Bind(source, target, writable)..., env)  in mount order, a later bind over
                                                         an earlier one (Bind: sandbox.layout's)
    RepositoryChoice(status: chosen | none | ambiguous | unknown, text, repository, source,
                     candidates, requested), .explain()

Errors are WorkspaceError (a HarnessError with a fix), GitError carrying git's own message.

On disk, under ``root``::

    <slug>/                          a worktree on branch harness/<slug>, or a scratch folder
    .repos/<name>/                   the clone of a `url` repository (its default cache)
    .patches/<slug>-<UTC time>.patch uncommitted work prune saved before removing a workspace
    .sandbox/<slug>/                 the git of the task's sandboxed agents: objects, refs, logs
    .views/<id>                      where a sandboxed agent is shown its folder: a spare's
                                     folder (worktree), else a link to the task's folder
    .sandbox/_<id>/                  a spare worktree's P (its branch: harness/_<id>)

Rules:

- A worktree starts from the repository's ``baseBranch`` (for a `url` repository, as just
  fetched into its cache: cloned the first time, fetched for each new task; follow-ups do
  not fetch). Its base commit is kept in the repository's config
  (``branch.harness/<slug>.harnessBase``), so follow-ups and a worktree re-created after
  prune, which continues the kept branch, report changes against the same commit.
- A task keeps the kind of workspace it started with: preparing another repository (or none)
  for a task that has a workspace is an error.
- Work that touches a repository's shared state (fetch, ``worktree add``, the branch and its
  config) runs one at a time per repository in this process; filling the new worktree with
  files runs outside that, so tasks are prepared in parallel. git's lock errors from other
  processes are retried briefly.
- Each such operation (adding a worktree and checking its files out, a spare taken or
  dropped, a sandbox's git view opened or settled) runs whole in one worker thread
  (``harness.blocking``): the harness's own git calls (``git_now``) and the folder work
  between them, so the event loop waits once per operation; a caller cancelled meanwhile
  goes once it has ended. What goes over the network (a clone, a fetch) and git over what an
  agent wrote (``harness.boundary.git``) stay async subprocesses.
- "Idle" is the newest modification time of anything in the workspace; ``prepare`` touches the
  folder, so a follow-up counts as activity. ``prune`` never deletes uncommitted work
  silently: uncommitted and untracked files (not ignored ones) go to a patch file first,
  ``git apply`` re-applies it on the kept branch; a scratch folder's files likewise. What a
  harness that stopped mid-run left of views and spares (folders, placeholder branches, P)
  goes with views older than the limit.
"""

from harness.workspaces.manager import (
    Changes,
    FileChange,
    GitError,
    GitView,
    Kept,
    PruneReport,
    Removed,
    RepositoryChoice,
    RepositoryGoneError,
    SandboxFolders,
    SandboxGit,
    WorkReport,
    Workspace,
    WorkspaceError,
    WorkspaceInfo,
    WorkspaceRequest,
    Workspaces,
    choose_repository,
    commit_message,
    task_branch,
    unknown_repository,
)

__all__ = [
    "Changes",
    "FileChange",
    "GitError",
    "GitView",
    "Kept",
    "PruneReport",
    "Removed",
    "RepositoryChoice",
    "RepositoryGoneError",
    "SandboxFolders",
    "SandboxGit",
    "WorkReport",
    "Workspace",
    "WorkspaceError",
    "WorkspaceInfo",
    "WorkspaceRequest",
    "Workspaces",
    "choose_repository",
    "commit_message",
    "task_branch",
    "unknown_repository",
]
