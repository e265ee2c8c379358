"""The project shipped with the harness, and ``harness init``, which writes it out.

``harness/defaults/`` holds the one copy of the default config.yaml (every setting, commented)
and roles/ (developer, product-analyst, reviewer). ``harness init [DIR]`` writes them into a
folder to start from; the demos fall back to them when no config.yaml is found.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness.atomic import write_atomic
from harness.errors import HarnessError
from harness.project import default_config_path

# Next to this module, so an installed wheel carries it as package data.
DEFAULTS = Path(__file__).resolve().parent.parent / "defaults"
CONFIG_FILE = "config.yaml"


def shipped_files() -> list[PurePosixPath]:
    """The files ``harness init`` writes, relative to the folder: config.yaml, roles/*.md."""
    roles = sorted(path.name for path in (DEFAULTS / "roles").glob("*.md"))
    return [PurePosixPath(CONFIG_FILE), *(PurePosixPath("roles", name) for name in roles)]


@dataclass(frozen=True)
class InitReport:
    folder: Path
    written: tuple[PurePosixPath, ...]
    replaced: tuple[PurePosixPath, ...] = ()
    # Already there and left as they were: a config.yaml whose roles init completed.
    kept: tuple[PurePosixPath, ...] = ()


def _roles_missing(folder: Path) -> bool:
    """A config.yaml is there but its roles folder holds no role file: init may complete it."""
    if not (folder / CONFIG_FILE).is_file():
        return False
    roles = folder / "roles"
    return not roles.is_dir() or not any(roles.glob("*.md"))


def init_project(folder: Path, *, force: bool = False) -> InitReport:
    """Write the shipped config.yaml and roles/ into ``folder`` (made if missing). Refuses,
    naming them, when any of those files exists, unless ``force``; other files are left be.
    A folder with a config.yaml but no roles/ is completed: the roles are written and the
    config.yaml kept (never overwritten)."""
    files = shipped_files()
    existing = tuple(name for name in files if (folder / name).exists())
    if existing and not force and _roles_missing(folder):
        kept = tuple(existing)
        missing = [name for name in files if name not in kept]
        _write(folder, missing)
        return InitReport(folder, tuple(missing), kept=kept)
    if existing and not force:
        listed = ", ".join(str(name) for name in existing)
        raise HarnessError(
            f"{folder.absolute()} already has {listed}: not overwriting them",
            fix="keep them and edit them, pass --force to replace them with the shipped "
            "defaults (changes to them are lost), or run `harness init DIR` for a new folder",
        )
    _write(folder, files)
    return InitReport(folder, tuple(files), existing)


def _write(folder: Path, files: list[PurePosixPath]) -> None:
    for name in files:
        target = folder / name
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, (DEFAULTS / name).read_bytes())
        except OSError as exc:
            raise HarnessError(
                f"cannot write {target}: {exc.strerror or exc}",
                fix="choose a folder you can write to: harness init DIR",
            ) from exc


def render_init(report: InitReport, *, cwd: Path) -> str:
    """What ``harness init`` wrote, and what to do next (pure)."""
    folder = report.folder.absolute()
    roles = [name.name for name in report.written if name.parts[0] == "roles"]
    if report.kept:
        lines = [
            f"Kept {', '.join(str(folder / name) for name in report.kept)} (already there, "
            "unchanged).",
            f"Wrote the missing {folder / 'roles'}/ ({', '.join(roles)}).",
        ]
    else:
        lines = [f"Wrote {folder / CONFIG_FILE} and {folder / 'roles'}/ ({', '.join(roles)})."]
    if report.replaced:
        lines.append("Replaced: " + ", ".join(str(name) for name in report.replaced))
    lines += ["", "Next:"]
    if folder != cwd.absolute():
        # Commands look for ./config.yaml (or --config, or $HARNESS_CONFIG).
        lines.append(f"  cd {report.folder}")
    lines += [
        '  harness run --scripted "plan: a settings page"   # try it offline, on a scripted model',
        "  export ANTHROPIC_API_KEY=sk-ant-...              # or a logged-in Claude Code",
        '  harness run "plan: a settings page"              # the same on the real model',
        "  harness tasks                                    # what ran, its status and cost",
        "  harness bot                                      # the Slack bot (SLACK_* tokens)",
        "Edit config.yaml (routing, limits, repositories) and roles/*.md (the agents' prompts",
        "and permissions) to suit; `harness --help` lists every command.",
    ]
    return "\n".join(lines)


def config_for_demo(explicit: Path | None) -> Path:
    """The config.yaml a demo runs on: ``explicit``, else the usual one (``$HARNESS_CONFIG``,
    else ./config.yaml), else the shipped defaults written to a new temporary folder, kept so
    that the tasks and transcript the demo points at are still there after it (a demo must
    run anywhere, even with no project)."""
    if explicit is not None:
        return explicit
    usual = default_config_path()
    if usual.exists():
        return usual
    folder = Path(tempfile.mkdtemp(prefix="harness-demo-"))
    init_project(folder)
    print(
        f"demo: no {usual} here: using the shipped defaults in {folder}; "
        "`harness init` writes them where you want them",
        file=sys.stderr,
        flush=True,
    )
    return folder / CONFIG_FILE
