"""Loading a project from its config.yaml: config, roles, task store, orchestrator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.clock import SYSTEM, Clock
from harness.config import Config, Role, RuntimeSettings, load_config, load_roles
from harness.config.routines_schema import check_routines
from harness.config.routing import validate_routing
from harness.config_file import default_config_path as default_config_path
from harness.errors import ConfigError, RoleError
from harness.problems import closest

if TYPE_CHECKING:
    from harness.agents.orchestrator import Orchestrator
    from harness.runtime.spec import AgentRuntime, Hosting
    from harness.tasks.files import FileTaskStore
    from harness.tasks.leases import Lease
    from harness.tasks.ledger_protocol import Ledger
    from harness.tasks.nats_store import NatsTaskStore
    from harness.tasks.store import Store
    from harness.workspaces.manager import Workspaces

# Categories that mean something without configuration: `conversational` is the default full
# access category, `worker` the usual read-only one. Any other category must be named in
# config.yaml's mcp settings, or it would silently get only the read-only tools.
BUILTIN_CATEGORIES: tuple[str, ...] = ("conversational", "worker")


@dataclass(frozen=True)
class Project:
    config: Config
    roles: Mapping[str, Role]


def load_project(config_path: Path) -> Project:
    """Read and validate config.yaml and the roles it names; fails fast with a clear error."""
    config = load_config(config_path)
    roles = load_roles(config.roles_dir, base_dir=config.base_dir)
    validate_routing(config, roles)
    check_routines(config.routines, list(roles), None, file=config.file)
    check_categories(config, roles)
    return Project(config=config, roles=roles)


def _configured_categories(config: Config) -> dict[str, str]:
    """Each category config.yaml's mcp settings name, with the field path of its first use."""
    named: dict[str, str] = {}
    for index, name in enumerate(config.mcp.full_access_categories):
        named.setdefault(name, f"mcp.fullAccessCategories[{index}]")
    for index, name in enumerate(config.mcp.all_tasks_categories):
        named.setdefault(name, f"mcp.allTasksCategories[{index}]")
    for section, rules in (("allow", config.mcp.allow), ("deny", config.mcp.deny)):
        for name in rules:
            named.setdefault(name, f"mcp.{section}.{name}")
    return named


def check_categories(config: Config, roles: Mapping[str, Role]) -> None:
    """Role categories and the categories config.yaml names must agree.

    A role's category must be built in or named in the mcp settings (a typo'd coordinator
    would otherwise get no coordinator tools); a category the mcp settings name, other than
    the built-in ones, must be some role's (a typo there grants nothing). Roles are checked
    first; when a role and config.yaml spell one category two ways, both places are named.
    """
    named = _configured_categories(config)
    known = list(dict.fromkeys([*BUILTIN_CATEGORIES, *named]))
    for role in sorted(roles.values(), key=lambda role: role.name):
        if role.category not in known:
            raise RoleError(
                role.source,
                "category",
                f"unknown category {role.category!r}; known categories: {', '.join(known)}",
                fix=_unknown_category_fix(role.category, known, named, config),
            )
    used = {role.category: role.source for role in roles.values()}
    for name, path in named.items():
        if name in used or name in BUILTIN_CATEGORIES:
            continue
        match = closest(name, sorted(used))
        hint = f"did you mean {match!r} ({used[match]} has `category: {match}`)? " if match else ""
        raise ConfigError(
            str(config.file),
            path,
            f"no role has category {name!r}; the roles' categories: {', '.join(sorted(used))}",
            fix=f"{hint}correct the name, remove it, or set `category: {name}` in a role file",
        )


def _unknown_category_fix(
    category: str, known: list[str], named: Mapping[str, str], config: Config
) -> str:
    declare = (
        f"name {category!r} in {config.file} under mcp.fullAccessCategories (every harness "
        "tool) or mcp.allow / mcp.deny"
    )
    match = closest(category, known)
    if match is None:
        return f"use one of the known categories, or {declare}"
    if match in named:
        return (
            f"did you mean {match!r}? {config.file} names it at {named[match]}: correct "
            f"whichever of the two is misspelled, or {declare}"
        )
    return f"did you mean {match!r}? Or {declare}"


def build_orchestrator(
    project: Project,
    runtime: AgentRuntime | Hosting | None = None,
    *,
    workspaces: Workspaces | None = None,
    simulated_costs: bool = False,
    clock: Clock = SYSTEM,
    store: Store | None = None,
) -> Orchestrator:
    """The orchestrator over the project's task store, serving the harness tools. Its agents
    run where config.yaml's ``runtime:`` says, unless given: an ``AgentRuntime`` runs them on
    a host in this process, a ``Hosting`` (workers over NATS) wherever it sends them. Front
    ends open it with ``harness.opening.open_harness``, which checks and connects the runtime
    first. ``workspaces``: those of the hosting given, when it is a host here. With
    ``simulated_costs`` (a scripted model) their records mark every cost as simulated.
    ``clock`` gives every time and id the harness stamps or draws. ``store``: the task store,
    when the caller made (and connected) it; else the one config.yaml's ``store:`` names."""
    # The agents' stack is imported when one is built, not with the project: a command
    # that only reads config.yaml (``harness --help``, ``doctor``) starts without it.
    from harness.agents.orchestrator import Orchestrator
    from harness.runtime.spec import Hosting
    from harness.tools.gateway import HarnessTools
    from harness.workspaces.manager import Workspaces

    config = project.config
    workspaces = workspaces or Workspaces(config.workspaces, clock)
    if isinstance(runtime, Hosting):
        hosting = runtime
    else:
        hosting = configured_hosting(config.runtime, workspaces, runtime)
    return Orchestrator(
        config,
        project.roles,
        store or task_store(config, clock),
        hosting,
        workspaces=workspaces,
        tools=HarnessTools,
        simulated_costs=simulated_costs,
        clock=clock,
    )


def task_store(config: Config, clock: Clock = SYSTEM) -> FileTaskStore | NatsTaskStore:
    """The task store config.yaml's ``store:`` names: the tasks folder, or JetStream on a
    NATS server (connected on first use). The one place a store is chosen."""
    if config.store.kind == "nats":
        from harness.tasks.nats_store import NatsTaskStore

        return NatsTaskStore(config.store, clock=clock)
    from harness.tasks.files import FileTaskStore

    return FileTaskStore(config.tasks_dir, clock=clock)


def task_ledger(config: Config, clock: Clock = SYSTEM) -> Ledger:
    """The front end's ledger (seen keys, requests, watches, what threads are owed), beside
    the task store: with ``store: {kind: nats}`` on the server, where bot replicas share it,
    else a SQLite file in the tasks folder. Connected (or opened) on first use."""
    if config.store.kind == "nats":
        from harness.tasks.nats_ledger import NatsLedger

        return NatsLedger(config.store, clock)
    from harness.tasks.ledger import LEDGER_FILE, SqliteLedger

    return SqliteLedger(config.tasks_dir / LEDGER_FILE, clock)


async def open_leases(config: Config, clock: Clock = SYSTEM) -> Lease:
    """The leases on the singletons, beside the task store: on the NATS server that replicas
    share with ``store: {kind: nats}``, else in this process (one process keeps a file store)."""
    if config.store.kind == "nats":
        from harness.tasks.leases import NatsLeases

        return await NatsLeases.open(config.store, clock)
    from harness.tasks.leases import LocalLeases

    return LocalLeases(clock)


def configured_hosting(
    settings: RuntimeSettings, workspaces: Workspaces, runtime: AgentRuntime | None = None
) -> Hosting:
    """The agents' hosting, not connected yet: a host in this process running them on
    ``runtime`` in ``workspaces`` when one is given, else where ``settings`` (config.yaml's
    ``runtime:``) say (``harness/runtime/backends.py``)."""
    from harness.runtime.backends import LocalBackend, runtime_backend

    backend = LocalBackend() if runtime is not None else runtime_backend(settings)
    return backend.hosting(workspaces, runtime)
