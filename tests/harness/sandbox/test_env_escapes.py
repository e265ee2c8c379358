"""What an agent can read of the harness's environment and of /etc, as a prompt-injected agent
would look: the real Claude Code CLI in real bubblewrap (and without it, ``sandbox: off``),
against the scripted model, in this process and on a ``harness worker`` over a real NATS
server (the ``rig`` fixture). The harness's process holds canary secrets named like those it
really holds; no process of the agent's may show them, only the variables it is allowed.
"""

from __future__ import annotations

import os
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from harness.agents.runs import harness_files
from harness.config.settings import parse_config
from harness.sandbox.layout import ETC_ENTRIES
from tests.harness.sandbox.conftest import MODEL_KEY, SLACK_TOKEN, Rig

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# In the harness's environment, as an operator's would have them.
CANARIES = {
    "HARNESS_MCP_TOKEN_ALICE": "canary-mcp-bearer-token-of-alice",
    "GITHUB_WEBHOOK_SECRET": "canary-github-webhook-secret",
    "RANDOM_SECRET": "canary-random-secret",
    "GITHUB_TOKEN": "canary-github-token",
    "HARNESS_SECRET_KEY": "canary-linked-accounts-key",
}
PASSED = {"PASSED_CA_CERTS": "/etc/ssl/certs/passed.pem", "PASSED_REGION": "eu-passed-1"}
ROLE_ENV = {"ROLE_OPTIONS": "role value with spaces and 'quotes' $(true)"}


@pytest.fixture
def canaries(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**CANARIES, **PASSED}.items():
        monkeypatch.setenv(name, value)


def variables(text: str) -> dict[str, str]:
    """``NAME=value`` lines (single-line values) of ``env``'s output."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {name: value for name, value in pairs if name.isidentifier()}


@pytest.mark.usefixtures("canaries")
async def test_no_process_inside_has_any_variable_but_the_allowed(rig: Rig) -> None:
    outcome, results = await rig.run(
        "env",
        "cat /proc/*/environ | tr '\\0' '\\n'",
        'echo "role=[$ROLE_OPTIONS] region=[$PASSED_REGION] home=[$HOME] tmp=[$TMPDIR]"',
        "ls /proc | grep -c '^[0-9]'",
        pass_env=("PASSED_*", "NOT_SET_ANYWHERE"),
        role_env=ROLE_ENV,
    )

    assert outcome.status == "completed", outcome.error
    every = "\n".join(results)
    for secret in (*CANARIES.values(), MODEL_KEY, SLACK_TOKEN):
        assert secret not in every
    # Not even the names: the sandbox starts from an empty environment.
    for name in (*CANARIES, "SLACK_BOT_TOKEN", "ANTHROPIC_API_KEY", "NOT_SET_ANYWHERE"):
        assert f"{name}=" not in every
    assert int(results[3].strip()) >= 3  # bubblewrap's pid 1, the bridge and its child, ...
    seen = variables(results[0])
    assert seen["PASSED_CA_CERTS"] == PASSED["PASSED_CA_CERTS"]
    assert seen["ROLE_OPTIONS"] == ROLE_ENV["ROLE_OPTIONS"]
    assert "PATH" in seen and "CLAUDE_CODE_ENTRYPOINT" in seen
    expected = f"role=[{ROLE_ENV['ROLE_OPTIONS']}] region=[eu-passed-1] home=[/home/agent]"
    assert f"{expected} tmp=[/tmp]" in results[2]


@pytest.mark.usefixtures("canaries")
async def test_without_the_sandbox_every_variable_not_allowed_is_empty(rig: Rig) -> None:
    outcome, results = await rig.run(
        "env",
        'echo "role=[$ROLE_OPTIONS] region=[$PASSED_REGION] random=[$RANDOM_SECRET]"',
        pass_env=("PASSED_REGION",),
        role_env=ROLE_ENV,
        sandboxed=False,
    )

    assert outcome.status == "completed", outcome.error
    every = "\n".join(results)
    for secret in (*CANARIES.values(), SLACK_TOKEN, PASSED["PASSED_CA_CERTS"]):
        assert secret not in every
    seen = variables(results[0])
    assert {name: seen[name] for name in CANARIES} == dict.fromkeys(CANARIES, "")
    assert seen["PASSED_REGION"] == "eu-passed-1" and seen["PASSED_CA_CERTS"] == ""
    assert f"role=[{ROLE_ENV['ROLE_OPTIONS']}] region=[eu-passed-1] random=[]" in results[1]


def unlisted_etc_files() -> list[str]:
    """Files of this machine's /etc, with content, the sandbox is not to show."""
    found = []
    for name in sorted(os.listdir("/etc")):
        path = f"/etc/{name}"
        if any(fnmatchcase(name, pattern) for pattern in ETC_ENTRIES):
            continue
        plain = os.path.isfile(path) and not os.path.islink(path) and os.access(path, os.R_OK)
        if plain and Path(path).read_bytes().strip():
            found.append(path)
    return found


async def test_of_etc_only_what_toolchains_read_is_there_and_named_secret_files_are_not(
    rig: Rig, tmp_path: Path
) -> None:
    unlisted = unlisted_etc_files()
    assert unlisted  # /etc/hostname, /etc/fstab, /etc/login.defs... on any Linux
    # Secret files where a folder the sandbox shows holds them (the project folder a role
    # works in): the NATS credentials config.yaml names, and one path of its sandbox.hide.
    project = rig.outside.parent / "project"
    (project / "secrets").mkdir(parents=True)
    creds = project / "secrets" / "nats.creds"
    creds.write_text("canary-nats-seed\n", encoding="utf-8")
    hidden_key = project / "deploy-key"
    hidden_key.write_text("canary-deploy-key\n", encoding="utf-8")
    config = parse_config(
        {
            "runtime": {"kind": "nats", "url": "nats://n:4222", "credentials": str(creds)},
            "sandbox": {"hide": [str(hidden_key)]},
        },
        file=tmp_path / "config.yaml",
    )

    outcome, results = await rig.run(
        "ls -A /etc",
        f"cat {' '.join(unlisted)}",
        f"cat {creds} {hidden_key}",
        "echo mine > notes.txt && cat notes.txt",
        hidden=harness_files(config),
        folder=project,
    )

    assert outcome.status == "completed", outcome.error
    shown = set(results[0].split())
    assert not shown & {Path(path).name for path in unlisted}, shown
    assert "passwd" in shown and "ld.so.cache" in shown
    every = "\n".join(results)
    for path in unlisted:
        for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
            assert len(line.strip()) < 8 or line.strip() not in every, (path, line)
    assert "canary-nats-seed" not in every and "canary-deploy-key" not in every
    assert results[3].strip() == "mine"  # the rest of its folder is its own


async def test_toolchains_still_work_with_the_etc_the_sandbox_shows(rig: Rig) -> None:
    certs = (
        "import ssl; c = ssl.create_default_context(); "
        "print('roots', len(c.get_ca_certs()) > 0 or bool(c.cert_store_stats()['x509_ca']))"
    )
    outcome, results = await rig.run(
        "whoami && id -gn && getent passwd $(id -u) | cut -d: -f1",
        f'python3 -c "{certs}"',
        "git --version && curl --version | head -1 && node --version",
        "date +%Z && ls /etc/ssl/certs | head -1",
    )

    assert outcome.status == "completed", outcome.error
    user = os.getenv("USER") or Path("/etc/passwd").read_text().split(":", 1)[0]
    assert results[0].split()[0] in {user, "root"} and "unknown" not in results[0]
    assert "roots True" in results[1]
    assert "git version" in results[2] and "curl" in results[2] and "v" in results[2]
    assert "not found" not in "\n".join(results)
