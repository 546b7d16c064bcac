"""A source task's ``context.request_commit()``: its offsets are stored and ``commit()`` runs without
waiting out ``offset.flush.interval.ms`` (WorkerSourceTask), and an exactly-once task under the
interval boundary commits its transaction at the next poll (ExactlyOnceWorkerSourceTask).

No broker: the test kit's acknowledging stand-in producer (the client layer is tested against real brokers
elsewhere; the MirrorSource task's use of this is in tests/integration/mirror/test_catch_up_commit.py).
"""

from __future__ import annotations

import asyncio

from mirrorline.api import ConnectorTaskId, SourceRecord, SourceTask
from mirrorline.runtime.worker_task import REQUESTED_FLUSH_MIN_GAP_S, WorkerSourceTask
from mirrorline.storage.offsets import MemoryOffsetStore
from support.herder_fakes import eventually, patch_record_producer, source_task_runner

TASK = ConnectorTaskId("asks", 0)


class AskingTask(SourceTask):
    """Returns ``count`` records once; asks for a commit when the last is acknowledged if ``ask``."""

    def __init__(self, count: int, ask: bool):
        self.count, self.ask = count, ask
        self.polled = False
        self.commits = 0
        self.acknowledged = 0

    async def start(self, config):
        pass

    async def poll(self):
        await asyncio.sleep(0.01)
        if self.polled:
            return []
        self.polled = True
        return [SourceRecord({"p": 0}, {"o": i}, "out", 0, None, b"v") for i in range(self.count)]

    async def commit_record(self, record, metadata):
        self.acknowledged += 1
        if self.ask and self.acknowledged == self.count:
            self.context.request_commit()

    async def commit(self):
        self.commits += 1

    async def stop(self):
        pass


async def started(monkeypatch, task: SourceTask) -> tuple[WorkerSourceTask, MemoryOffsetStore]:
    patch_record_producer(monkeypatch)
    store = MemoryOffsetStore()
    runner = source_task_runner(TASK, task, offset_store=store, stall_timeout_s=0)
    await runner.start()
    return runner, store


async def test_a_task_that_asks_has_its_offsets_stored_and_commit_called_without_waiting_for_the_interval(
        monkeypatch):
    task = AskingTask(50, ask=True)
    runner, store = await started(monkeypatch, task)
    try:
        async def stored_offset():
            return (await store.get(TASK.connector, [{"p": 0}]))[0]

        assert await eventually(stored_offset, timeout=5, what="the offsets stored on request") == {"o": 49}
        await eventually(lambda: task.commits >= 1, what="commit() after the requested flush")
    finally:
        await runner.stop(1.0)


async def test_a_task_that_does_not_ask_waits_for_the_interval(monkeypatch):
    task = AskingTask(50, ask=False)
    runner, store = await started(monkeypatch, task)
    try:
        await eventually(lambda: task.acknowledged == 50, what="every record acknowledged")
        await asyncio.sleep(0.3)
        assert (await store.get(TASK.connector, [{"p": 0}]))[0] is None
        assert task.commits == 0
    finally:
        await runner.stop(1.0)
    assert (await store.get(TASK.connector, [{"p": 0}]))[0] == {"o": 49}  # stored on stop, as always


async def test_requests_closer_than_the_gap_are_served_by_one_flush(monkeypatch):
    task = AskingTask(10, ask=True)
    runner, store = await started(monkeypatch, task)
    try:
        await eventually(lambda: task.commits >= 1, what="the first requested flush")
        for _ in range(5):
            runner.request_commit()
            await asyncio.sleep(0.01)
        await asyncio.sleep(REQUESTED_FLUSH_MIN_GAP_S + 0.3)
        # one flush for the five requests, a second after the first at the soonest
        assert task.commits == 2, task.commits
    finally:
        await runner.stop(1.0)
