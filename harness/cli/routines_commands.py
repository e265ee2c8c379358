"""``harness routines``: each routine of config.yaml with its trigger, next firing, last runs,
failures in a row and whether it is paused (``--json`` for scripts); ``run NAME`` fires one
now through the running bot; ``pause NAME`` / ``resume NAME``.

Reading and pausing need no bot: they read and change the routines' state beside the tasks.
``run`` leaves a request there that the bot's scheduler takes at its next tick (a second at
most) and answers with the task's slug and thread; without a running bot (none holds the
routines' serving lock) it says so at once and leaves nothing behind.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.config.routines_schema import Routine
    from harness.project import Project
    from harness.routines.model import RoutineState
    from harness.routines.state import RoutineStates, RunAnswer

# How long `run` waits for a bot to take its request, then for the task to start.
TAKE_SECONDS = 10.0
START_SECONDS = 60.0


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    parser = subparsers.add_parser(
        "routines",
        parents=[common],
        help="list the routines (schedules, GitHub events, HTTP calls), or run/pause/resume one",
        description="List config.yaml's routines: trigger, next firing, last runs (status, "
        "cost, thread), failures in a row, paused or not, and firings skipped. `run NAME` "
        "fires one now through the running bot (a paused one starts nothing); `pause NAME` "
        "stops it firing on any trigger until `resume NAME`.",
    )
    parser.add_argument(
        "action", nargs="?", choices=("list", "run", "pause", "resume"), default="list"
    )
    parser.add_argument("name", nargs="?", help="the routine (run, pause, resume)")
    parser.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    parser.set_defaults(handler=main)


def main(project: Project, args: argparse.Namespace) -> int:
    # Imported here, not at the top: every command's parser imports this module.
    import getpass
    import json

    from harness.errors import HarnessError
    from harness.routines.state import RoutineStates

    states = RoutineStates(project.config.tasks_dir)
    if args.action == "list":
        if args.name:
            raise HarnessError(
                "`harness routines` lists them all", fix=f"run `harness routines {args.name}`"
            )
        listing = [
            describe(routine, states.read(routine.name)) for routine in project.config.routines
        ]
        print(json.dumps(listing, indent=2) if args.json else render(listing))
        return 0
    routine = _routine(project, args)
    if args.action == "run":
        return _run(states, routine, as_json=args.json)
    user = getpass.getuser()
    state = states.update(routine.name, lambda s: _paused(s, args.action == "pause", user))
    said = describe(routine, state)
    print(
        json.dumps(said, indent=2)
        if args.json
        else f"{routine.name}: {'paused' if state.paused else 'resumed'}"
    )
    return 0


def _routine(project: Project, args: argparse.Namespace) -> Routine:
    from harness.errors import HarnessError
    from harness.problems import did_you_mean

    names = [routine.name for routine in project.config.routines]
    if not args.name:
        raise HarnessError(
            f"`harness routines {args.action}` needs the routine's name",
            fix=f"run `harness routines {args.action} NAME`, NAME one of: "
            f"{', '.join(names) or '(none)'}",
        )
    for routine in project.config.routines:
        if routine.name == args.name:
            return routine
    raise HarnessError(
        f"no routine {args.name!r} in {project.config.file}",
        fix=f"{did_you_mean(args.name, names)}the routines are: {', '.join(names) or '(none)'}",
    )


def _paused(state: RoutineState, pause: bool, user: str) -> RoutineState:
    import dataclasses

    from harness.clock import SYSTEM, timestamp
    from harness.routines.model import Pause

    if not pause:
        return dataclasses.replace(state, paused=None, failures=0)
    if state.paused is not None:
        return state
    why = f"paused by {user} with `harness routines pause`"
    return dataclasses.replace(state, paused=Pause(timestamp(SYSTEM.now()), user, why))


def _run(states: RoutineStates, routine: Routine, *, as_json: bool) -> int:
    import getpass
    import json

    from harness.clock import SYSTEM
    from harness.errors import HarnessError
    from harness.routines.state import RunRequest

    state = states.read(routine.name)
    if state.paused is not None:
        raise HarnessError(
            f"routine {routine.name} is paused ({state.paused.why}); nothing was started",
            fix=f"run `harness routines resume {routine.name}` first",
        )
    if not states.served():
        raise HarnessError(
            f"no bot is running with this config.yaml to run {routine.name}; nothing was started",
            fix="start the bot (`harness bot`) with this config.yaml, then run it again",
        )
    request_id = SYSTEM.token(8)
    states.request_run(RunRequest(id=request_id, routine=routine.name, by=getpass.getuser()))
    answer = _wait(states, request_id, TAKE_SECONDS)
    if answer is None and states.withdraw(request_id):
        raise HarnessError(
            f"no running bot took the request to run {routine.name} within {TAKE_SECONDS:.0f} s; "
            "nothing was started",
            fix="start the bot (`harness bot`) with this config.yaml, then run it again",
        )
    answer = answer or _wait(states, request_id, START_SECONDS)
    if answer is None:
        raise HarnessError(
            f"the bot took the request to run {routine.name} but did not answer in time",
            fix="see `harness routines` and the bot's log for what became of it",
        )
    if "error" in answer:
        raise HarnessError(
            f"routine {routine.name}: {answer['error']}", fix="see `harness routines`"
        )
    print(
        json.dumps(answer)
        if as_json
        else f"{routine.name}: started task {answer.get('slug')}, thread {answer.get('thread')}"
    )
    return 0


def _wait(states: RoutineStates, request_id: str, seconds: float) -> RunAnswer | None:
    # A file the bot writes: looked at every tenth of a second, within a bound.
    import time

    deadline = time.monotonic() + seconds
    while True:
        answer = states.take_answer(request_id)
        if answer is not None:
            return answer
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


def describe(routine: Routine, state: RoutineState) -> dict[str, Any]:
    """A routine as ``--json`` prints it."""
    from harness import serialise
    from harness.clock import SYSTEM, timestamp
    from harness.routines.schedule import next_firing

    upcoming = next_firing(routine, SYSTEM.now())
    return {
        "name": routine.name,
        "trigger": routine.kind,
        "triggerText": routine.trigger_text(),
        "channel": routine.channel,
        "owner": routine.owner,
        "role": routine.role,
        "repository": routine.repository,
        "nextFiring": timestamp(upcoming) if upcoming and not state.paused else None,
        "paused": serialise.to_json(state.paused) if state.paused else None,
        "failures": state.failures,
        "disableAfterFailures": routine.disable_after_failures,
        "lastRuns": [
            {k: v for k, v in serialise.to_json(run).items() if v is not None}
            for run in reversed(state.runs[-5:])
        ],
        "skipped": [serialise.to_json(skip) for skip in reversed(state.skipped[-5:])],
        # Firings whose task is being made, or was when a bot stopped (its next start settles
        # them), and those queued behind the last run.
        "starting": [
            {"firing": s.firing.key, "kind": s.firing.kind, "at": s.firing.at}
            for s in state.starting
        ],
        "queued": [{"firing": f.key, "kind": f.kind, "at": f.at} for f in state.queued],
    }


def render(listing: list[dict[str, Any]]) -> str:
    if not listing:
        return "no routines: add them under `routines:` in config.yaml (see the README)"
    lines: list[str] = []
    for item in listing:
        paused = item["paused"]
        state = f"paused: {paused['why']}" if paused else f"next {item['nextFiring'] or '—'}"
        failures = f"{item['failures']}/{item['disableAfterFailures']} failures in a row"
        lines.append(f"{item['name']}  {item['triggerText']}  {state}  {failures}")
        for run in item["lastRuns"]:
            cost = f"${run['costUsd']:.2f}" if run.get("costUsd") is not None else "—"
            where = run.get("slug") or run.get("error") or ""
            lines.append(
                f"    {run['at']}  {run['kind']:<8} {run['status']:<11} {cost:>7}  "
                f"{where}  {run.get('thread') or ''}".rstrip()
            )
        for entry in item["starting"]:
            lines.append(f"    {entry['at']}  {entry['kind']:<8} starting (its task being made)")
        for entry in item["queued"]:
            lines.append(f"    {entry['at']}  {entry['kind']:<8} queued behind the last run")
        for skip in item["skipped"]:
            count = f" ({skip['count']} slots)" if skip["count"] > 1 else ""
            lines.append(f"    {skip['at']}  skipped{count}: {skip['why']}")
    return "\n".join(lines)
