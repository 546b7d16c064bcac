"""One runtime source task on its own, against a real cluster: no worker, no herder.

For tests of what :class:`~mirrorline.runtime.worker_task.WorkerSourceTask` itself guarantees
(its write bound, its stop): the task's offsets are kept in memory, and the failures it reports
are collected instead of restarting it.
"""

from __future__ import annotations

from typing import Any

from mirrorline.api import ConnectorTaskId, SourceTask
from mirrorline.runtime.context import StoreOffsetReader
from mirrorline.runtime.worker_task import WorkerSourceTask
from mirrorline.storage.offsets import MemoryOffsetStore


def lone_source_runner(connector: str, task: SourceTask, config: dict[str, str], bootstrap: str,
                       **producer_kwargs: Any) -> tuple[WorkerSourceTask, MemoryOffsetStore, list[BaseException]]:
    """A runner of ``task`` (task 0 of ``connector``) writing to ``bootstrap``, offsets flushed only on
    stop; returns it with its offset store and the list its reported failures go to."""
    store = MemoryOffsetStore()
    failures: list[BaseException] = []

    async def on_status(*_args) -> None:
        pass

    async def on_failure(_task_id, exc: BaseException) -> None:
        failures.append(exc)

    runner = WorkerSourceTask(ConnectorTaskId(connector, 0), task, config,
                              producer_kwargs={"bootstrap_servers": bootstrap, **producer_kwargs},
                              offset_store=store, offset_reader=StoreOffsetReader(store, connector),
                              on_status=on_status, on_failure=on_failure, flush_interval_s=60)
    return runner, store, failures
