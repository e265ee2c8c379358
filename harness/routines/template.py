"""A routine's prompt filled from its event: ``{pull_request.title}`` takes the payload's
``pull_request`` object's ``title``. Pure. Only ``{dotted.names}`` are replaced (no format
specs, no attribute access: the event is untrusted input); ``{{`` and ``}}`` are braces."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from harness.routines.model import RoutineError

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")
# A field's text in a prompt is cut here: an event is not a place to hide a long prompt.
MAX_FIELD_CHARS = 2000


def prompt_fields(template: str) -> list[str]:
    """The fields a prompt names, in order."""
    return [m.group(1) for m in _FIELD.finditer(template) if m.group(1)]


def render_prompt(routine: str, template: str, fields: Mapping[str, Any]) -> str:
    """``template`` with each ``{field}`` replaced; a RoutineError naming the first field the
    event lacks."""

    def value(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        found: Any = fields
        for part in match.group(1).split("."):
            if isinstance(found, Mapping) and part in found:
                found = found[part]
            elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
                found = found[int(part)]
            else:
                raise RoutineError(
                    routine,
                    f"the prompt names {{{match.group(1)}}}, which this event does not have",
                    fix="name a field the event carries (see the event's payload), or leave "
                    "it out of the routine's prompt",
                    field=match.group(1),
                )
        text = found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)
        return text[:MAX_FIELD_CHARS]

    return _FIELD.sub(value, template)
