"""GitHub's webhook deliveries about checks: their signature and what they name (pure).

A delivery only wakes the follower of the pull request it names, which then asks GitHub
itself: nothing in a delivery is taken for the checks' state, so a forged or replayed one
can at most cause an early look.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

SECRET_ENV = "GITHUB_WEBHOOK_SECRET"
CHECK_EVENTS = frozenset({"check_run", "check_suite", "status", "workflow_job", "workflow_run"})


@dataclass(frozen=True)
class ChecksReported:
    repository: str  # owner/name
    sha: str | None
    branches: tuple[str, ...] = ()


def signature_ok(secret: str, body: bytes, signature: str | None) -> bool:
    """Whether ``X-Hub-Signature-256`` is the body's HMAC-SHA256 under ``secret``."""
    if not secret or not signature or not signature.startswith("sha256="):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature.removeprefix("sha256="))


def checks_reported(event: str, body: bytes) -> ChecksReported | None:
    """The repository and commit a check event is about; None for other events or bodies."""
    if event not in CHECK_EVENTS:
        return None
    try:
        data: Any = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    repository = (data.get("repository") or {}).get("full_name")
    found = data.get(event)
    inner: dict[str, Any] = found if isinstance(found, dict) else {}
    sha = inner.get("head_sha") or data.get("sha")
    branches = [inner.get("head_branch")] + [
        b.get("name") for b in data.get("branches") or [] if isinstance(b, dict)
    ]
    if not isinstance(repository, str):
        return None
    return ChecksReported(
        repository,
        sha if isinstance(sha, str) else None,
        tuple(b for b in branches if isinstance(b, str) and b),
    )
