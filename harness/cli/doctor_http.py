"""The one HTTP call of a doctor check (Slack, the model's API, GitHub): its answer, or the
failing line that says the service could not be reached and what to check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from harness.cli.doctor_check import NETWORK_SECONDS, Check


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # names in lower case
    body: Any  # the JSON body when asked for (and the call succeeded), else None


async def call(
    method: Literal["GET", "POST"],
    url: str,
    headers: Mapping[str, str],
    *,
    check: str,
    fix: str,
    json_when: tuple[int, ...] | None = None,
) -> Answer | Check:
    """``method url`` within NETWORK_SECONDS; the body read as JSON when the status is in
    ``json_when`` (any status when it is empty). A failing ``check`` line naming ``fix``
    when there is no answer (or no JSON where JSON was asked for)."""
    try:
        timeout = aiohttp.ClientTimeout(total=NETWORK_SECONDS)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.request(method, url, headers=dict(headers)) as response,
        ):
            wanted = json_when is not None and (not json_when or response.status in json_when)
            body = await response.json(content_type=None) if wanted else None
            headers = {name.lower(): value for name, value in response.headers.items()}
            return Answer(response.status, headers, body)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
        return Check(check, "fail", f"cannot reach {url} within {NETWORK_SECONDS:g} s: {why}", fix)
