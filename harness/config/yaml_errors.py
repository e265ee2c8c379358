"""A YAML syntax error said as one line, for config.yaml and a role's front matter alike."""

from __future__ import annotations

from typing import TypeVar

import yaml

from harness.errors import FileFieldError

_E = TypeVar("_E", bound=FileFieldError)


def yaml_syntax_error(
    kind: type[_E], file: str, field: str, exc: yaml.YAMLError, *, fix: str, first_line: int = 1
) -> _E:
    """A YAML syntax error as one line, ``file:line:column: problem``, not PyYAML's multi-line
    text about ``<unicode string>``. ``first_line`` is the file's line the parsed text starts at
    (a role's front matter starts below its `---`)."""
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
