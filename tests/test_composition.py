"""The core is composed of services, not mixed in: read from the source files.

The orchestrator keeps the agents' lifecycle and wires the services; it inherits from no
class of the project and stays small. No class borrows another's fields or methods (a mixin
stubs them under ``TYPE_CHECKING``); the harness tools reach the services, not the
orchestrator; the front ends open the harness without naming a runtime; tests use a service's
methods, never an orchestrator's private attributes.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_PUBLIC_METHODS = 25
FRONT_ENDS = ("harness/cli", "harness/mcp_server", "bot")
RUNTIME_KINDS = {"local", "nats", "scripted"}


def modules(*folders: str, naming: str = "") -> Iterator[tuple[Path, ast.Module]]:
    """The modules under ``folders``; with ``naming``, only those whose text has it (any
    case): a check that needs a name in the source skips parsing the files without it."""
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if naming.lower() in text.lower():
                yield path, parsed(path, text)


@functools.cache
def parsed(path: Path, text: str) -> ast.Module:
    # The checks below read the same trees: each file is parsed once per process.
    return ast.parse(text, str(path))


def where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"


def orchestrator_class() -> ast.ClassDef:
    tree = ast.parse((ROOT / "harness/agents/orchestrator.py").read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Orchestrator")


def public_methods(cls: ast.ClassDef) -> list[str]:
    return [
        node.name
        for node in cls.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not node.name.startswith("_")
    ]


def test_the_orchestrator_inherits_nothing_and_keeps_to_the_lifecycle() -> None:
    cls = orchestrator_class()

    assert cls.bases == [], "the orchestrator composes services; it mixes none in"
    methods = public_methods(cls)
    assert len(methods) <= MAX_PUBLIC_METHODS, (
        f"{len(methods)} public methods: {methods}; move what is not the agents' lifecycle "
        "into a service"
    )


def test_no_class_borrows_another_class_s_methods() -> None:
    borrowed = [
        where(path, node)
        for path, tree in modules("harness", "bot", naming="TYPE_CHECKING")
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef)
        for node in cls.body
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
    ]
    assert borrowed == [], f"methods stubbed for a class that is mixed into another: {borrowed}"


def test_no_tool_module_imports_the_orchestrator() -> None:
    found = [
        where(path, node)
        for path, tree in modules("harness/tools")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (
            node.module == "harness.agents.orchestrator"
            or (
                node.module == "harness.agents"
                and any(a.name == "Orchestrator" for a in node.names)
            )
        )
    ]
    assert found == [], f"a tool reaches the orchestrator instead of the services: {found}"


def test_no_front_end_names_a_runtime_or_probes_the_hosting() -> None:
    found = []
    for path, tree in modules(*FRONT_ENDS):
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                named = [
                    c.value
                    for c in (node.left, *node.comparators)
                    if isinstance(c, ast.Constant) and c.value in RUNTIME_KINDS
                ]
                if named and "kind" in ast.unparse(node):
                    found.append(f"{where(path, node)} compares a runtime kind: {named}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in ("connect", "problem")
            ):
                found.append(f"{where(path, node)} probes {node.args[1].value!r}")
    assert found == [], "a front end chooses the runtime itself: " + "; ".join(found)


def test_no_test_touches_an_orchestrator_s_private_attribute() -> None:
    found = [
        where(path, node)
        for path, tree in modules("tests", "bench", naming="orchestrator")
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and "orchestrator" in ast.unparse(node.value).lower().split(".")[-1]
    ]
    assert found == [], f"build the service alone instead: {found}"


def test_the_checks_above_can_see_a_mixin_and_a_private_read(tmp_path: Path) -> None:
    mixed = ast.parse(
        "class Part:\n    if TYPE_CHECKING:\n        def task(self): ...\n"
        "class Orchestrator(Part):\n    pass\n"
    )
    part, orchestrator = (n for n in mixed.body if isinstance(n, ast.ClassDef))
    assert isinstance(part.body[0], ast.If) and orchestrator.bases != []
    peek = ast.parse("orchestrator._store.get(1)")
    attributes = [n for n in ast.walk(peek) if isinstance(n, ast.Attribute)]
    assert any(
        a.attr == "_store" and ast.unparse(a.value).split(".")[-1] == "orchestrator"
        for a in attributes
    )
