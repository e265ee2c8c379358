"""Bearer tokens of the HTTP transport: each maps to a Slack user, whose rights the caller
has. Compared in constant time (every configured token is compared, whichever matches), and
never logged or kept in what the request carries on."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from mcp.server.auth.provider import AccessToken

# What AccessToken.token holds instead of the secret: nothing downstream needs it.
_REDACTED = "(redacted)"


def _digest(token: str) -> bytes:
    # Equal lengths for compare_digest, whatever the tokens' lengths.
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenTable:
    """``verify_token`` as the mcp SDK's bearer backend calls it."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._users = [(_digest(token), user) for token, user in tokens.items()]

    def user_of(self, token: str) -> str | None:
        offered = _digest(token)
        found = None
        for digest, user in self._users:  # no early exit: the time says nothing
            if hmac.compare_digest(digest, offered):
                found = user
        return found

    async def verify_token(self, token: str) -> AccessToken | None:
        user = self.user_of(token)
        if user is None:
            return None
        return AccessToken(token=_REDACTED, client_id=user, scopes=[], subject=user)
