"""The shape of the source tree: which part of ``harness/`` may import which.

Rules, checked over every ``import`` in ``harness/`` (at the top of a module, inside a function
and under ``TYPE_CHECKING`` alike, for each is a dependency all the same):

- no import cycle between the units of ``harness/``: its packages and its top-level modules;
- each package imports only the packages before it in ``ORDER``;
- a top-level module of ``harness/`` (a leaf: ``errors.py``, ``clock.py``, ``retry.py``...)
  imports only other leaves, never a package, but for the entry points in ``ENTRY_POINTS``;
- ``harness/`` never imports the Slack front end (``bot``) nor Slack's libraries;
- no module in ``harness/``, ``bot/`` or ``tests/`` is over ``MAX_LINES`` lines.
"""

from __future__ import annotations

import ast
import functools
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 450

# The packages of harness/, bottom to top: each imports only those before it. ``project``
# and ``opening`` are the top-level modules that put the packages together; ``testing``
# (kits the tests, demos and benchmarks share) sits above what it drives, below the demos.
ORDER = (
    "harness.permissions",
    "harness.config",
    "harness.tasks",
    "harness.memory",  # the notes kept per channel and repository, for agents' context
    "harness.sandbox",  # what bubblewrap shows (its binds), checked and started
    "harness.boundary",  # runs commands over an agent's folder in a sandbox of its own
    "harness.workspaces",
    "harness.forge",
    "harness.runtime",
    "harness.agents",
    "harness.tools",
    "harness.routines",  # tasks started by a schedule, a GitHub event or a call
    "harness.testing",
    "harness.project",
    "harness.opening",
    "harness.cli",
    "harness.mcp_server",
)
# Top-level modules that import packages by design, and why.
ENTRY_POINTS = {
    "harness": "``import harness``'s lazy exports for embedders name the packages' classes",
    "harness.__main__": "``python -m harness`` runs the CLI",
    "harness.project": "builds an orchestrator from a config: every package put together",
    "harness.opening": "opens the harness for a front end: the project with its runtime",
}
# Never imported by harness/: the front end is a plug-in of the core, not a part of it.
FRONT_END = ("bot", "slack_bolt", "slack_sdk")


@dataclass(frozen=True)
class Import:
    """``module`` (in ``file``, at ``line``) imports ``target``, a dotted module name."""

    module: str
    file: str
    line: int
    target: str

    @property
    def site(self) -> str:
        return f"{self.module} ({self.file}:{self.line})"


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_imports(root: Path, folders: Iterable[str]) -> list[Import]:
    """Every import of every module under ``folders`` of ``root``, wherever in the module it
    is; ``from a import b`` imports ``a.b`` when that is a module of the tree, else ``a``.
    Relative imports are made absolute. Reads the files, changes nothing."""
    files = sorted(path for folder in folders for path in (root / folder).rglob("*.py"))
    modules = {module_name(path, root) for path in files}
    found = []
    for path in files:
        module = module_name(path, root)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        file = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), file)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    above = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*above, *([base] if base else [])])
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            else:
                continue
            found += [Import(module, file, node.lineno, target) for target in targets]
    return found


def unit_of(module: str, packages: frozenset[str]) -> str:
    """The package of harness/ ``module`` is in, or the top-level module it is."""
    parts = module.split(".")
    if parts[0] != "harness" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2]) if ".".join(parts[:2]) in packages else module


def unit_graph(
    imports: Iterable[Import], packages: frozenset[str]
) -> dict[str, dict[str, list[Import]]]:
    """Which unit of harness/ imports which (none itself), with the imports that make it so."""
    graph: dict[str, dict[str, list[Import]]] = {}
    for found in imports:
        source, target = unit_of(found.module, packages), unit_of(found.target, packages)
        if source != target and all(unit.split(".")[0] == "harness" for unit in (source, target)):
            graph.setdefault(source, {}).setdefault(target, []).append(found)
    return graph


def cycles(graph: Mapping[str, Mapping[str, object]]) -> list[list[str]]:
    """The cycles of ``graph``: for each edge on one, the shortest cycle through it, as its
    nodes in order from the least, that one again at the end."""
    found: list[list[str]] = []
    for part in strongly_connected(graph):
        for source in part:
            for target in sorted(set(graph.get(source, {})) & part):
                back = shortest_path(graph, target, source, part)
                cycle = [source, *back[:-1]]
                least = cycle.index(min(cycle))
                cycle = [*cycle[least:], *cycle[:least]]
                if [*cycle, cycle[0]] not in found:
                    found.append([*cycle, cycle[0]])
    return sorted(found)


def strongly_connected(graph: Mapping[str, Mapping[str, object]]) -> list[set[str]]:
    """The parts of ``graph`` (more than one node) in which every node reaches every other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    parts: list[set[str]] = []

    def connect(node: str) -> None:  # Tarjan's
        index[node] = low[node] = len(index)
        stack.append(node)
        for after in sorted(graph.get(node, {})):
            if after not in index:
                connect(after)
                low[node] = min(low[node], low[after])
            elif after in stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            part: list[str] = []
            while not part or part[-1] != node:
                part.append(stack.pop())
            if len(part) > 1:
                parts.append(set(part))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return parts


def shortest_path(
    graph: Mapping[str, Mapping[str, object]], start: str, end: str, inside: set[str]
) -> list[str]:
    """The nodes from ``start`` to ``end`` (both included) on a shortest path within
    ``inside``; breadth first, neighbours in name order."""
    paths = {start: [start]}
    queue = [start]
    while end not in paths:
        node = queue.pop(0)
        for after in sorted(set(graph.get(node, {})) & inside - set(paths)):
            paths[after] = [*paths[node], after]
            queue.append(after)
    return paths[end]


def where(imports: Iterable[Import]) -> str:
    return ", ".join(dict.fromkeys(found.site for found in imports))


def explain(cycle: list[str], graph: Mapping[str, Mapping[str, list[Import]]]) -> str:
    steps = [
        f"{source} -> {target} at " + where(graph[source][target])
        for source, target in itertools.pairwise(cycle)
    ]
    return "import cycle " + " -> ".join(cycle) + ":\n    " + "\n    ".join(steps)


# --- the tree ------------------------------------------------------------------------------


def harness_packages() -> frozenset[str]:
    return frozenset(
        f"harness.{path.parent.name}" for path in (ROOT / "harness").glob("*/__init__.py")
    )


@functools.cache
def harness_imports() -> tuple[Import, ...]:
    # Read once per process: four checks below walk the same imports.
    return tuple(read_imports(ROOT, ["harness"]))


def test_no_import_cycle_in_harness() -> None:
    graph = unit_graph(harness_imports(), harness_packages())

    found = [explain(cycle, graph) for cycle in cycles(graph)]

    assert not found, "\n".join(found)


def test_each_package_imports_only_those_before_it() -> None:
    assert sorted(harness_packages()) == sorted(set(ORDER) - set(ENTRY_POINTS))
    graph = unit_graph(harness_imports(), harness_packages())
    rank = {unit: place for place, unit in enumerate(ORDER)}

    upward = [
        f"{source} imports {target}, which comes after it, at " + where(sites)
        for source, targets in graph.items()
        for target, sites in targets.items()
        if source in rank and target in rank and rank[target] > rank[source]
    ]

    assert not upward, "\n".join(upward)


def test_leaf_modules_import_only_leaves() -> None:
    packages = harness_packages()
    graph = unit_graph(harness_imports(), packages)

    wrong = [
        f"{source} imports {target} at " + where(sites)
        for source, targets in graph.items()
        if source not in packages and source not in ENTRY_POINTS
        for target, sites in targets.items()
        if target in packages or target in ENTRY_POINTS
    ]

    assert not wrong, "\n".join(wrong)


def test_harness_never_imports_the_front_end() -> None:
    wrong = [
        f"{found.site} imports {found.target}"
        for found in harness_imports()
        if found.target.split(".")[0] in FRONT_END
    ]

    assert not wrong, "\n".join(wrong)


def test_no_module_is_too_long() -> None:
    long = [
        f"{path.relative_to(ROOT)}: {lines} lines"
        for folder in ("harness", "bot", "tests")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]

    assert not long, "\n".join(long)


# --- the checker itself, on a tree made for it ---------------------------------------------


def write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def test_a_cycle_is_named_with_each_import_that_makes_it(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "harness/__init__.py": "",
            "harness/errors.py": "",
            "harness/a/__init__.py": "",
            "harness/a/one.py": "from harness.errors import E\nfrom harness.b import two\n",
            "harness/b/__init__.py": "",
            "harness/b/two.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from harness.c.three import T\n"
            ),
            "harness/c/__init__.py": "",
            "harness/c/three.py": "def late():\n    from ..a import one\n",
        },
    )
    packages = frozenset({"harness.a", "harness.b", "harness.c"})
    graph = unit_graph(read_imports(tmp_path, ["harness"]), packages)

    assert [explain(cycle, graph) for cycle in cycles(graph)] == [
        "import cycle harness.a -> harness.b -> harness.c -> harness.a:\n"
        "    harness.a -> harness.b at harness.a.one (harness/a/one.py:2)\n"
        "    harness.b -> harness.c at harness.b.two (harness/b/two.py:3)\n"
        "    harness.c -> harness.a at harness.c.three (harness/c/three.py:2)"
    ]


def test_imports_one_way_make_no_cycle(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "harness/__init__.py": "",
            "harness/a/__init__.py": "from harness.a.one import X\n",
            "harness/a/one.py": "import harness.errors\n",
            "harness/b/__init__.py": "from harness import a\nfrom harness.a import X\n",
        },
    )
    graph = unit_graph(read_imports(tmp_path, ["harness"]), frozenset({"harness.a", "harness.b"}))

    assert cycles(graph) == []
    assert {source: sorted(targets) for source, targets in graph.items()} == {
        "harness.a": ["harness.errors"],
        "harness.b": ["harness.a"],
    }
