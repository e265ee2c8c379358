"""People's linked forge accounts: who a person is on a GitHub, and their token, kept
encrypted at rest.

One file, ``<tasks>/.accounts.json`` (the task store's folder, which no agent's sandbox
shows), holds per GitHub API and per person the login and the token as Fernet ciphertext,
and a check value that tells a wrong key from a damaged entry. The key is
``HARNESS_SECRET_KEY`` when set, else ``<tasks>/.secret-key``, made (mode 0600) the first
time a key is needed. Tokens are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.atomic import write_atomic
from harness.errors import HarnessError

# cryptography is imported where a token is sealed or opened: every process that opens the
# harness builds this store, and most never read a token (about 10 ms of each start).
if TYPE_CHECKING:
    from cryptography.fernet import Fernet

logger = logging.getLogger(__name__)

ACCOUNTS_FILE = ".accounts.json"
KEY_FILE = ".secret-key"
KEY_ENV = "HARNESS_SECRET_KEY"
VERSION = 1
# Encrypted into the file: decrypting it tells a wrong key at once, before any token is used.
_CHECK = b"harness linked accounts"
_NEW_KEY = (
    "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
)

Accounts = dict[str, dict[str, dict[str, str]]]  # api url -> user -> {"login", "token"}


@dataclass(frozen=True)
class LinkedAccount:
    """A person's own account on a forge: pull requests opened with ``token`` are theirs."""

    login: str
    token: str = field(repr=False)  # never in a log line


class AccountsError(HarnessError):
    """The linked accounts cannot be read: a wrong key, a damaged file or key file."""


class AccountStore:
    """The linked accounts of the task store in ``folder`` (the orchestrator's
    ``LinkedAccounts``).
    ``environ`` is where ``HARNESS_SECRET_KEY`` is looked up (the process's by default)."""

    def __init__(self, folder: Path, *, environ: Mapping[str, str] | None = None) -> None:
        self.file = folder / ACCOUNTS_FILE
        self.key_file = folder / KEY_FILE
        self._environ = environ if environ is not None else os.environ
        self._fernet: Fernet | None = None
        self._lock = asyncio.Lock()

    async def account(self, user: str, api_url: str) -> LinkedAccount | None:
        """``user``'s account on the GitHub at ``api_url``, None when they linked none."""
        async with self._lock:
            return await asyncio.to_thread(self._account, user, api_url)

    async def login(self, user: str, api_url: str) -> str | None:
        """The login ``user`` linked on ``api_url`` (the token is not decrypted)."""
        async with self._lock:
            accounts = await asyncio.to_thread(self._read)
        entry = accounts.get(api_url, {}).get(user)
        return entry["login"] if entry else None

    async def link(self, user: str, api_url: str, login: str, token: str) -> None:
        """From now on ``user``'s pull requests on ``api_url`` are opened as ``login``."""
        async with self._lock:
            await asyncio.to_thread(self._link, user, api_url, login, token)
        logger.info("linked %s to GitHub account %s on %s", user, login, api_url)

    async def unlink(self, user: str, api_url: str) -> bool:
        """Forgets ``user``'s account on ``api_url``; False when none was linked."""
        async with self._lock:
            removed = await asyncio.to_thread(self._unlink, user, api_url)
        if removed:
            logger.info("unlinked %s's GitHub account on %s", user, api_url)
        return removed

    # -- in a worker thread ------------------------------------------------------------

    def _account(self, user: str, api_url: str) -> LinkedAccount | None:
        from cryptography.fernet import InvalidToken

        entry = self._read().get(api_url, {}).get(user)
        if entry is None:
            return None
        try:
            token = self._key().decrypt(entry["token"].encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError) as exc:
            raise AccountsError(
                f"{user}'s linked GitHub account in {self.file} cannot be decrypted",
                fix=f"ask {user} to link it again with `/harness connect github`",
            ) from exc
        return LinkedAccount(entry["login"], token)

    def _link(self, user: str, api_url: str, login: str, token: str) -> None:
        accounts = self._read()
        sealed = self._key().encrypt(token.encode("utf-8")).decode("ascii")
        accounts.setdefault(api_url, {})[user] = {"login": login, "token": sealed}
        self._write(accounts)

    def _unlink(self, user: str, api_url: str) -> bool:
        accounts = self._read()
        if accounts.get(api_url, {}).pop(user, None) is None:
            return False
        if not accounts[api_url]:
            del accounts[api_url]
        self._write(accounts)
        return True

    def _read(self) -> Accounts:
        from cryptography.fernet import InvalidToken

        try:
            text = self.file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise AccountsError(
                f"cannot read the linked accounts {self.file}: {exc.strerror}",
                fix=f"let the bot's user read and write {self.file}",
            ) from exc
        accounts, check = _parse(text, self.file)
        try:
            self._key().decrypt(check.encode("ascii"))
        except (InvalidToken, UnicodeError):
            raise AccountsError(
                f"the linked accounts in {self.file} were saved with another secret key",
                fix=f"set {KEY_ENV} to the key they were saved with (or put back "
                f"{self.key_file}); or delete {self.file} and have everyone link their "
                "account again with `/harness connect github`",
            ) from None
        return accounts

    def _write(self, accounts: Accounts) -> None:
        check = self._key().encrypt(_CHECK).decode("ascii")
        document = {"version": VERSION, "check": check, "accounts": accounts}
        data = json.dumps(document, indent=2, sort_keys=True) + "\n"
        self.file.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.file, data.encode("utf-8"), mode=0o600)

    def _key(self) -> Fernet:
        if self._fernet is None:
            self._fernet = self._load_key()
        return self._fernet

    def _load_key(self) -> Fernet:
        given = self._environ.get(KEY_ENV, "").strip()
        if given:
            fix = f"set {KEY_ENV} to a key made with {_NEW_KEY}"
            return _fernet(given, f"{KEY_ENV} is not a Fernet key", fix=fix)
        try:
            key = self.key_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            key = self._make_key_file()
        except OSError as exc:
            raise AccountsError(
                f"cannot read the secret key {self.key_file}: {exc.strerror}",
                fix=f"let the bot's user read {self.key_file}, or set {KEY_ENV}",
            ) from exc
        return _fernet(
            key,
            f"{self.key_file} holds no Fernet key",
            fix=f"put back the key file the accounts were saved with, or set {KEY_ENV}; "
            f"else delete {self.key_file} and {self.file} and have everyone link again",
        )

    def _make_key_file(self) -> str:
        """A new key in ``key_file``, unless another process made one first (then that one).
        Linked into place from a finished temp file, so nobody reads half a key."""
        from cryptography.fernet import Fernet

        key = Fernet.generate_key().decode("ascii")
        self.key_file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f"{KEY_FILE}.", suffix=".tmp", dir=self.key_file.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:  # mkstemp makes it 0600
                handle.write(key + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp, self.key_file)
            except FileExistsError:
                return self.key_file.read_text(encoding="utf-8").strip()
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        logger.info("made a secret key for linked accounts in %s", self.key_file)
        return key


def _fernet(key: str, problem: str, *, fix: str) -> Fernet:
    from cryptography.fernet import Fernet

    try:
        return Fernet(key.encode("ascii"))
    except (ValueError, UnicodeError):
        raise AccountsError(problem, fix=fix) from None


def _parse(text: str, file: Path) -> tuple[Accounts, str]:
    """The accounts and the check value of the file's text (pure)."""
    damaged = AccountsError(
        f"the linked accounts file {file} is damaged",
        fix=f"delete {file} and have everyone link their account again with "
        "`/harness connect github`",
    )
    try:
        document: Any = json.loads(text)
    except ValueError:
        raise damaged from None
    if not isinstance(document, dict) or not isinstance(document.get("check"), str):
        raise damaged
    accounts = document.get("accounts")
    if not isinstance(accounts, dict):
        raise damaged
    for people in accounts.values():
        if not isinstance(people, dict):
            raise damaged
        for entry in people.values():
            if not isinstance(entry, dict) or not all(
                isinstance(entry.get(name), str) for name in ("login", "token")
            ):
                raise damaged
    return accounts, document["check"]
