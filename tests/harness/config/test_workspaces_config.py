"""config.yaml's workspaces, repositories and runtime sections: paths resolved from the config
folder, the shipped examples, and each wrong repository, branch or runtime named with the fix."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.cli.scaffold import DEFAULTS
from harness.config.settings import load_config, parse_config
from tests.harness.config.settings_support import parse_error, workspaces_error


def test_no_workspaces_section_means_no_repositories_and_a_root_in_the_config_folder(
    tmp_path: Path,
) -> None:
    settings = parse_config({}, file=tmp_path / "config.yaml").workspaces

    assert settings.root == tmp_path / ".agents" / "workspaces"
    assert settings.repositories == {}
    assert settings.default is None
    assert settings.channels == {}
    assert settings.prune_after_days == 14.0


def test_workspaces_section_parses_with_paths_relative_to_the_config_folder(
    tmp_path: Path,
) -> None:
    settings = parse_config(
        {
            "workspaces": {
                "root": "work",
                "pruneAfterDays": 3,
                "default": "web",
                "channels": {"C0123ABCD": "api"},
                "repositories": {
                    "web": {"path": "../web", "baseBranch": "develop"},
                    "api": {"url": "https://git.example.com/api.git"},
                    "docs_2": {"url": "git@example.com:docs.git", "cache": "caches/docs"},
                },
            }
        },
        file=tmp_path / "app" / "config.yaml",
    ).workspaces

    assert settings.root == tmp_path / "app" / "work"
    assert settings.prune_after_days == 3.0
    assert settings.default == "web"
    assert settings.channels == {"C0123ABCD": "api"}
    web, api, docs = (settings.repositories[name] for name in ("web", "api", "docs_2"))
    assert (web.name, web.path, web.url, web.cache) == ("web", tmp_path / "web", None, None)
    assert web.base_branch == "develop"
    assert api.path is None
    assert api.url == "https://git.example.com/api.git"
    assert api.cache == tmp_path / "app" / "work" / ".repos" / "api"
    assert api.base_branch == "main"
    assert docs.cache == tmp_path / "app" / "caches" / "docs"


def shipped_example(section: str) -> object:
    """The commented-out example of ``section`` in the shipped config.yaml, parsed."""
    lines = (DEFAULTS / "config.yaml").read_text(encoding="utf-8").splitlines()
    start = lines.index(f"# {section}:")
    end = next((n for n in range(start + 1, len(lines)) if not lines[n].startswith("#  ")), None)
    example = [line.removeprefix("#").removeprefix(" ") for line in lines[start:end]]
    return yaml.safe_load("\n".join(example))


def test_the_shipped_example_of_workspaces_parses(tmp_path: Path) -> None:
    example = shipped_example("workspaces")
    assert isinstance(example, dict)
    settings = parse_config(example, file=tmp_path / "c.yaml")

    assert sorted(settings.workspaces.repositories) == ["api", "web"]
    assert load_config(DEFAULTS / "config.yaml").workspaces.repositories == {}


def test_the_shipped_example_of_a_nats_runtime_parses(tmp_path: Path) -> None:
    example = shipped_example("runtime")
    assert isinstance(example, dict)
    settings = parse_config(example, file=tmp_path / "c.yaml")

    assert (settings.runtime.kind, settings.runtime.url) == ("nats", "nats://10.0.0.5:4222")
    assert load_config(DEFAULTS / "config.yaml").runtime.kind == "local"


def test_a_repository_with_both_path_and_url_is_rejected(tmp_path: Path) -> None:
    error = workspaces_error(
        {"repositories": {"web": {"path": "../web", "url": "https://x/web.git"}}}, tmp_path
    )

    assert error.field == "workspaces.repositories.web"
    assert error.problem == "sets both `path` and `url`"
    assert error.fix.startswith("keep only one: `path:` (a local git repository) or `url:`")


def test_a_repository_with_neither_path_nor_url_is_rejected(tmp_path: Path) -> None:
    error = workspaces_error({"repositories": {"web": {"baseBranch": "main"}}}, tmp_path)

    assert error.field == "workspaces.repositories.web"
    assert error.problem == "needs `path` or `url`"
    assert "e.g. `{path: ../web}`" in error.fix


def test_a_cache_for_a_path_repository_is_rejected(tmp_path: Path) -> None:
    error = workspaces_error({"repositories": {"web": {"path": "a", "cache": "b"}}}, tmp_path)

    assert error.field == "workspaces.repositories.web.cache"
    assert "remove `cache:`" in error.fix


def test_an_unknown_default_repository_suggests_the_configured_one(tmp_path: Path) -> None:
    error = workspaces_error(
        {"default": "wbe", "repositories": {"web": {"path": "a"}, "api": {"path": "b"}}},
        tmp_path,
    )

    assert error.field == "workspaces.default"
    assert error.problem == "unknown repository 'wbe'; known repositories: api, web"
    assert error.fix.startswith("did you mean 'web'? name one of `workspaces.repositories`")


def test_an_unknown_channel_repository_names_the_channel(tmp_path: Path) -> None:
    error = workspaces_error(
        {"channels": {"C0123ABCD": "Web"}, "repositories": {"web": {"path": "a"}}}, tmp_path
    )

    assert error.field == "workspaces.channels.C0123ABCD"
    assert error.problem == "unknown repository 'Web'; known repositories: web"
    assert error.fix.startswith("did you mean 'web'?")


def test_a_default_without_any_repository_says_none_are_configured(tmp_path: Path) -> None:
    error = workspaces_error({"default": "web"}, tmp_path)

    assert error.field == "workspaces.default"
    assert error.problem == "unknown repository 'web'; known repositories: (none configured)"
    assert "`web: {path: ../web}`" in error.fix


def test_a_repository_name_that_is_not_plain_is_rejected_with_a_plain_one(
    tmp_path: Path,
) -> None:
    error = workspaces_error({"repositories": {"Web App": {"path": "a"}}}, tmp_path)

    assert error.field == "workspaces.repositories.Web App"
    assert error.problem == "invalid repository name 'Web App'"
    assert error.fix.startswith("did you mean 'web-app'? use lowercase letters, digits")


def test_a_base_branch_git_would_read_as_an_option_is_rejected(tmp_path: Path) -> None:
    error = workspaces_error(
        {"repositories": {"web": {"path": "a", "baseBranch": "--orphan"}}}, tmp_path
    )

    assert error.field == "workspaces.repositories.web.baseBranch"
    assert error.problem == "'--orphan' is not a valid git branch name"
    assert "`baseBranch: main`" in error.fix


def test_a_workspaces_root_holding_the_config_folder_is_rejected(tmp_path: Path) -> None:
    error = workspaces_error({"root": "."}, tmp_path)

    assert error.field == "workspaces.root"
    assert error.problem == f"{tmp_path} holds the harness's own folder ({tmp_path})"
    assert "root: .agents/workspaces" in error.fix


def test_prune_after_days_must_be_positive(tmp_path: Path) -> None:
    error = workspaces_error({"pruneAfterDays": 0}, tmp_path)

    assert error.field == "workspaces.pruneAfterDays"
    assert "greater than 0" in error.problem


def test_a_nats_runtime_names_its_server_and_resolves_its_files(tmp_path: Path) -> None:
    config = parse_config(
        {
            "runtime": {
                "kind": "nats",
                "url": "nats://10.0.0.5:4222",
                "credentials": "secrets/harness.creds",
                "prefix": "acme",
                "lostAfterSeconds": 5,
            }
        },
        file=tmp_path / "config.yaml",
    )

    runtime = config.runtime
    assert (runtime.kind, runtime.url, runtime.prefix) == ("nats", "nats://10.0.0.5:4222", "acme")
    assert runtime.credentials == tmp_path / "secrets" / "harness.creds"
    assert runtime.lost_after_seconds == 5.0
    assert parse_config({}, file=tmp_path / "config.yaml").runtime.kind == "local"


def test_a_nats_runtime_without_a_url_says_what_to_add(tmp_path: Path) -> None:
    error = parse_error({"runtime": {"kind": "nats"}}, tmp_path)
    assert error.field == "runtime"
    assert "url" in str(error) and "nats://" in str(error)


def test_an_unknown_runtime_kind_lists_the_kinds(tmp_path: Path) -> None:
    error = parse_error({"runtime": {"kind": "kubernetes"}}, tmp_path)
    assert error.field == "runtime.kind"
    assert "local" in str(error) and "nats" in str(error)


def test_a_repositorys_github_short_form_takes_the_shared_api_and_the_default_token(
    tmp_path: Path,
) -> None:
    settings = parse_config(
        {
            "workspaces": {"repositories": {
                "web": {"path": "../web", "github": "acme/web"},
                "api": {"url": "https://x/api.git", "github": {
                    "repository": "acme/api", "tokenEnv": "API_TOKEN",
                    "apiUrl": "https://ghe.example.com/api/v3/",
                    "app": {"id": 12, "privateKeyFile": "keys/app.pem"}}},
            }},
            "github": {"apiUrl": "https://github.internal/api/", "autoFixTries": 2},
        },
        file=tmp_path / "config.yaml",
    )  # fmt: skip

    web = settings.workspaces.repositories["web"]
    assert web.github is not None and web.remote == "origin"
    assert (web.github.full_name, web.github.api_url, web.github.token_env) == (
        "acme/web", "https://github.internal/api", "GITHUB_TOKEN"
    )  # fmt: skip
    api = settings.workspaces.repositories["api"].github
    assert api is not None and api.api_url == "https://ghe.example.com/api/v3"
    assert api.app is not None and api.app.private_key_file == tmp_path / "keys" / "app.pem"
    assert settings.github.auto_fix_tries == 2 and settings.github.follow_checks
    assert load_config(DEFAULTS / "config.yaml").github.client_id is None


def test_a_github_repository_that_is_not_owner_slash_name_says_how_to_write_it(
    tmp_path: Path,
) -> None:
    error = workspaces_error(
        {"repositories": {"web": {"path": "../web", "github": "https://github.com/acme/web"}}},
        tmp_path,
    )

    assert error.field == "workspaces.repositories.web.github.repository"
    assert "is not owner/name" in error.problem and "`acme/web`" in error.fix
