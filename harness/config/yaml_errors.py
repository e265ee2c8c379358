"""Reading the YAML a user edits (config.yaml, a role's front matter): a key written twice in
one mapping is refused, since PyYAML would keep the last silently (a second ``maxTurns:``
further down would change a cap unseen); and a syntax error is said as one line."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, TypeVar

import yaml
import yaml.constructor
import yaml.nodes

from harness.errors import FileFieldError

_E = TypeVar("_E", bound=FileFieldError)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping names one key twice; the marks are the first and the second."""

    def __init__(self, key: object, first: yaml.Mark, second: yaml.Mark) -> None:
        super().__init__("while constructing a mapping", first, f"duplicate key {key!r}", second)
        self.key = key


class _UniqueKeys(yaml.constructor.SafeConstructor):
    """Refuses a key written twice in one mapping (merge keys aside)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Hashable, yaml.Mark] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.nodes.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node)
            if not isinstance(key, Hashable):
                continue
            if key in seen:
                raise DuplicateKeyError(key, seen[key], key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


# PyYAML's own parser, as `yaml.safe_load` uses (libyaml's words its errors differently).
class _UniqueKeyLoader(_UniqueKeys, yaml.SafeLoader):
    """A safe loader that refuses a key written twice in one mapping."""


# libyaml's parser (where PyYAML was built with it) with the same constructor: about 20 times
# faster on config.yaml (0.4 ms against 9), read by every command, bot and worker at start.
_FastUniqueKeyLoader = (
    type("_FastUniqueKeyLoader", (_UniqueKeys, yaml.CSafeLoader), {})
    if yaml.__with_libyaml__
    else None
)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` that raises DuplicateKeyError on a key written twice in a mapping."""
    if _FastUniqueKeyLoader is not None:
        try:
            return yaml.load(text, Loader=_FastUniqueKeyLoader)
        except yaml.YAMLError:
            pass  # parsed again below: the error said is PyYAML's own, as documented
    return yaml.load(text, Loader=_UniqueKeyLoader)


def yaml_syntax_error(
    kind: type[_E], file: str, field: str, exc: yaml.YAMLError, *, fix: str, first_line: int = 1
) -> _E:
    """A YAML syntax error as one line, ``file:line:column: problem``, not PyYAML's multi-line
    text about ``<unicode string>``. ``first_line`` is the file's line the parsed text starts at
    (a role's front matter starts below its `---`). A duplicate key names the key and both
    lines, with its own fix."""
    if isinstance(exc, DuplicateKeyError):
        first = exc.context_mark.line + first_line if exc.context_mark else 0
        second = exc.problem_mark.line + first_line if exc.problem_mark else 0
        column = exc.problem_mark.column + 1 if exc.problem_mark else 1
        problem = f"duplicate key `{exc.key}` on lines {first} and {second}"
        error = kind(
            file,
            field,
            problem,
            fix=f"keep one `{exc.key}:` (YAML would silently use the last one, line {second})",
        )
        error.message = f"{file}:{second}:{column}: {problem}"
        error.args = (error.message,)
        return error
    problem = "YAML syntax error"
    where = file
    if isinstance(exc, yaml.MarkedYAMLError):
        problem += f": {exc.problem or 'invalid YAML'}"
        if exc.problem_mark is not None:
            mark = exc.problem_mark
            where = f"{file}:{mark.line + first_line}:{mark.column + 1}"
        if exc.context:
            context = exc.context
            if exc.context_mark is not None and exc.context_mark != exc.problem_mark:
                start = exc.context_mark
                context += f" started at {start.line + first_line}:{start.column + 1}"
            problem += f" ({context})"
    else:
        problem += f": {exc}"
    error = kind(file, field, problem, fix=fix)
    error.message = f"{where}: {problem}"
    error.args = (error.message,)
    return error
