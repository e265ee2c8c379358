"""Tasks and everything kept about them: the task model, the task store and its files.

A task is a Slack thread (or a terminal request) with its dispatches: one record per agent,
with its result, cost and where its work is. The store keeps each under
``<tasks dir>/<slug>/`` (``task.json``, the agents' journals, the audit log, diffs); only it
reads or writes those files.

Modules: ``model`` (the domain values: Task, DispatchRecord, AgentResult...), ``store``
(the protocols: ``TaskStore``, ``TaskFiles``, ``RunLiveness``, all three as ``Store``; and the
in-memory store), ``files`` (the file store), ``lookups`` (the file store's reads and
lookups across tasks), ``task_json`` (task.json's format), ``index`` (the SQLite index that
answers listings), ``index_db`` (the index's tables, connection and row writes), ``repair``
(salvaging a damaged task.json), ``removal`` (which tasks may be deleted), ``journal``
(batched JSON-lines logs), ``folder_io`` (a store's file work with aiofiles, on one
thread), ``run_lock`` (whether the process that started a dispatch still lives), ``ledger``
(what a front end has seen and still owes people), ``context`` (a task's history as the next
agent's prompt), ``common`` (slugs, file names, times).

The names below are imported on first use: reading the task model (a listing, a command that
renders a task) does not load the file store, its journals and aiofiles, or asyncio.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.tasks.context import (
        build_task_context,
        compose_prompt,
    )
    from harness.tasks.model import (
        AgentResult,
        Decision,
        DispatchRecord,
        Feedback,
        Progress,
        Task,
        TaskSummary,
        ThreadRef,
    )
    from harness.tasks.store import (
        DamagedTask,
        FileTaskStore,
        LogEntries,
        MemoryTaskStore,
        RepairReport,
        RunLiveness,
        Store,
        TaskFiles,
        TaskStore,
    )

_EXPORTS = {
    "AgentResult": "harness.tasks.model",
    "build_task_context": "harness.tasks.context",
    "compose_prompt": "harness.tasks.context",
    "DamagedTask": "harness.tasks.store",
    "Decision": "harness.tasks.model",
    "DispatchRecord": "harness.tasks.model",
    "Feedback": "harness.tasks.model",
    "FileTaskStore": "harness.tasks.store",
    "LogEntries": "harness.tasks.store",
    "MemoryTaskStore": "harness.tasks.store",
    "Progress": "harness.tasks.model",
    "RepairReport": "harness.tasks.store",
    "RunLiveness": "harness.tasks.store",
    "Store": "harness.tasks.store",
    "Task": "harness.tasks.model",
    "TaskFiles": "harness.tasks.store",
    "TaskStore": "harness.tasks.store",
    "TaskSummary": "harness.tasks.model",
    "ThreadRef": "harness.tasks.model",
}

__all__ = [
    "AgentResult",
    "DamagedTask",
    "Decision",
    "DispatchRecord",
    "Feedback",
    "FileTaskStore",
    "LogEntries",
    "MemoryTaskStore",
    "Progress",
    "RepairReport",
    "RunLiveness",
    "Store",
    "Task",
    "TaskFiles",
    "TaskStore",
    "TaskSummary",
    "ThreadRef",
    "build_task_context",
    "compose_prompt",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness.tasks' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
