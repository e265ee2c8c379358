"""What no agent may read or change, wherever its folder is: the harness's own files and the
secrets config.yaml names (pure)."""

from __future__ import annotations

from harness.config.settings import Config
from harness.forge.accounts import KEY_FILE


def harness_files(config: Config) -> tuple[str, ...]:
    """What no agent may read or change, even where its folder holds it: the config, the
    roles (an agent could grant itself rules there), the tasks and the workspaces root; and
    every secret file config.yaml names, wherever it sits (a folder the sandbox shows may
    hold it): each GitHub App's private key, the linked accounts' key, the NATS
    credentials; and the paths of ``sandbox.hide``."""
    paths = (config.file, config.roles_dir, config.tasks_dir, config.workspaces.root)
    keys = tuple(
        repo.github.app.private_key_file
        for repo in config.workspaces.repositories.values()
        if repo.github is not None and repo.github.app is not None
    )
    secrets = [config.tasks_dir / KEY_FILE]
    if config.runtime.credentials is not None:
        secrets.append(config.runtime.credentials)
    named = (*paths, *keys, *secrets, *config.sandbox.hide)
    return tuple(dict.fromkeys(str(path) for path in named))
