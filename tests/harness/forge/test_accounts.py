"""The linked accounts: kept encrypted in the task store's folder, read back after a restart,
and a wrong key or a damaged file said plainly with the fix."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from harness.forge.accounts import (
    ACCOUNTS_FILE,
    KEY_ENV,
    KEY_FILE,
    AccountsError,
    AccountStore,
    LinkedAccount,
)

pytestmark = pytest.mark.anyio

API = "https://api.github.com"
ENTERPRISE = "https://ghe.example.com/api/v3"
TOKEN = "gho_alices_token_0123456789"


def mode(file: Path) -> int:
    return stat.S_IMODE(file.stat().st_mode)


async def test_a_linked_account_survives_a_restart_and_its_token_is_not_in_the_file(
    tmp_path: Path,
) -> None:
    await AccountStore(tmp_path, environ={}).link("U1", API, "alice", TOKEN)

    again = AccountStore(tmp_path, environ={})  # the bot started again
    assert await again.account("U1", API) == LinkedAccount("alice", TOKEN)
    assert await again.login("U1", API) == "alice"
    assert await again.account("U2", API) is None
    assert await again.account("U1", ENTERPRISE) is None  # linked per GitHub

    saved = (tmp_path / ACCOUNTS_FILE).read_text(encoding="utf-8")
    assert "alice" in saved and TOKEN not in saved and TOKEN[4:20] not in saved
    assert mode(tmp_path / ACCOUNTS_FILE) == 0o600 and mode(tmp_path / KEY_FILE) == 0o600
    assert TOKEN not in repr(await again.account("U1", API))


async def test_the_key_from_the_environment_is_used_and_no_key_file_is_made(
    tmp_path: Path,
) -> None:
    key = Fernet.generate_key().decode()
    await AccountStore(tmp_path, environ={KEY_ENV: key}).link("U1", API, "alice", TOKEN)

    assert not (tmp_path / KEY_FILE).exists()
    found = await AccountStore(tmp_path, environ={KEY_ENV: key}).account("U1", API)
    assert found is not None and found.token == TOKEN


async def test_another_key_says_to_set_the_same_key_as_before(tmp_path: Path) -> None:
    key = Fernet.generate_key().decode()
    await AccountStore(tmp_path, environ={KEY_ENV: key}).link("U1", API, "alice", TOKEN)
    other = AccountStore(tmp_path, environ={KEY_ENV: Fernet.generate_key().decode()})

    with pytest.raises(AccountsError) as wrong:
        await other.account("U1", API)

    assert "saved with another secret key" in wrong.value.message
    assert f"set {KEY_ENV} to the key they were saved with" in wrong.value.fix
    assert "/harness connect github" in wrong.value.fix
    with pytest.raises(AccountsError):  # nor is anything added under the wrong key
        await other.link("U2", API, "bob", "gho_bob")


async def test_a_lost_key_file_is_not_silently_replaced_by_a_working_one(
    tmp_path: Path,
) -> None:
    await AccountStore(tmp_path, environ={}).link("U1", API, "alice", TOKEN)
    (tmp_path / KEY_FILE).unlink()

    with pytest.raises(AccountsError) as wrong:
        await AccountStore(tmp_path, environ={}).account("U1", API)
    assert str(tmp_path / KEY_FILE) in wrong.value.fix


@pytest.mark.parametrize("damage", ["{not json", '{"accounts": []}', '{"check": "x"}'])
async def test_a_damaged_file_says_to_delete_it_and_link_again(tmp_path: Path, damage: str) -> None:
    (tmp_path / ACCOUNTS_FILE).write_text(damage, encoding="utf-8")

    with pytest.raises(AccountsError) as damaged:
        await AccountStore(tmp_path, environ={}).account("U1", API)

    assert "is damaged" in damaged.value.message
    assert f"delete {tmp_path / ACCOUNTS_FILE}" in damaged.value.fix


async def test_a_key_that_is_no_fernet_key_says_how_to_make_one(tmp_path: Path) -> None:
    store = AccountStore(tmp_path, environ={KEY_ENV: "hunter2"})

    with pytest.raises(AccountsError) as bad:
        await store.link("U1", API, "alice", TOKEN)

    assert f"{KEY_ENV} is not a Fernet key" in bad.value.message
    assert "Fernet.generate_key()" in bad.value.fix


async def test_unlinking_forgets_the_account_on_that_github_only(tmp_path: Path) -> None:
    store = AccountStore(tmp_path, environ={})
    await store.link("U1", API, "alice", TOKEN)
    await store.link("U1", ENTERPRISE, "alice-corp", "gho_corp")

    assert await store.unlink("U1", API) is True
    assert await store.unlink("U1", API) is False  # nothing left to unlink

    again = AccountStore(tmp_path, environ={})
    assert await again.account("U1", API) is None
    assert await again.login("U1", ENTERPRISE) == "alice-corp"
    assert await AccountStore(tmp_path / "empty", environ={}).unlink("U1", API) is False
