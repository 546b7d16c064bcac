"""The stall watchdog does not count an idle task's pending records every few seconds.

``pending_records()`` costs a mirror task O(partitions); an idle task (nothing acknowledged for
longer than ``task.stall.timeout.ms``) was counted every period (5 s at the default timeout),
which at 8,000 partitions was a tenth of an idle worker's CPU. Once a count finds nothing, the
next waits half the stall timeout unless a write is in flight. Without a broker: the runtime with
a producer stand-in from the test kit. Flagging a real stall is tested against frozen brokers
in tests/faults/test_stall_watchdog.py.
"""

from __future__ import annotations

import asyncio

from mirrorline.api import ConnectorTaskId, SourceTask
from mirrorline.runtime.worker_task import STALLED, WorkerSourceTask
from support.herder_fakes import patch_record_producer, source_task_runner

TASK = ConnectorTaskId("watchdog", 0)
STALL_S = 0.8  # period 0.2 s, quiet period 0.4 s


class CountedIdleTask(SourceTask):
    """Returns no records; ``pending_records()`` answers ``pending`` and counts its calls."""

    pending = 0

    async def start(self, config):
        self.counts = 0

    async def poll(self):
        await asyncio.sleep(0.05)
        return []

    def pending_records(self):
        self.counts += 1
        return self.pending

    async def stop(self):
        pass


async def _run(monkeypatch, task: SourceTask, seconds: float) -> WorkerSourceTask:
    patch_record_producer(monkeypatch)
    runner = source_task_runner(TASK, task, stall_timeout_s=STALL_S)
    await runner.start()
    try:
        await asyncio.sleep(seconds)
    finally:
        await runner.stop(0.5)
    return runner


async def test_an_idle_task_with_nothing_pending_is_counted_at_the_quiet_period(monkeypatch):
    task = CountedIdleTask()
    runner = await _run(monkeypatch, task, STALL_S + 2.0)
    # counting starts once nothing was acknowledged for STALL_S; over the 2 s after that, every
    # 0.2 s would be about 10 counts, the quiet period of 0.4 s about 5
    assert 2 <= task.counts <= 7, task.counts
    assert STALLED not in runner.warnings


async def test_a_task_with_records_pending_is_counted_every_period_and_flagged(monkeypatch):
    task = CountedIdleTask()
    task.pending = 3
    runner = await _run(monkeypatch, task, STALL_S + 2.0)
    assert task.counts >= 8, task.counts
    assert STALLED in runner.warnings
