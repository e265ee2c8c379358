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
"""

from harness.tasks.context import build_task_context, compose_prompt
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
