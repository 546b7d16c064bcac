"""A source task's stop holds even when its poll ignores the cancellation, against a real broker.

CI once saw a task's poll loop outlive its stop (Python 3.11's ``asyncio.wait_for`` dropped the
cancel, see tests/unit/runtime/test_swallowed_cancellation.py): it went on writing while the stop
flushed and stored offsets, so records past the stored offsets landed in the topic, and its next
write then failed the task, which the supervisor would have started again. Now the stop cancels
a deaf loop again every second, refuses any write attempted after it began, and reports no
failure for it. Both cases are checked here with librdkafka reading the topic back: it holds
exactly the records up to the stored offset, once each, in order.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import TopicPartition as RdPartition

from mirrorline.api import SourceRecord, SourceTask
from support.source_runner import lone_source_runner

pytestmark = pytest.mark.integration

PER_POLL = 10


class DeafTask(SourceTask):
    """Numbered records, PER_POLL per poll. Once ``deaf`` is set, the next poll ignores
    ``ignore`` cancels (or every cancel for ``deaf_s`` seconds), then returns records."""

    def __init__(self) -> None:
        self.next = 0
        self.deaf = asyncio.Event()
        self.ignore = 0
        self.deaf_s = 0.0
        self.cancels_ignored = 0
        self.returned_after_deafness = asyncio.Event()

    async def start(self, config):
        self.topic = config["topic"]

    async def poll(self):
        await asyncio.sleep(0.01)
        if self.deaf.is_set():
            await self._ignore_cancels()
        batch = [SourceRecord({"p": 0}, {"o": i}, self.topic, 0, None, i.to_bytes(4, "big"))
                 for i in range(self.next, self.next + PER_POLL)]
        self.next += PER_POLL
        if self.deaf.is_set():
            self.deaf.clear()
            self.returned_after_deafness.set()
        return batch

    async def _ignore_cancels(self) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + self.deaf_s
        while True:
            try:
                await asyncio.sleep(0.02 if self.deaf_s else 30)
                if self.deaf_s and loop.time() >= until:
                    return
            except asyncio.CancelledError:
                if self.deaf_s:
                    self.cancels_ignored += 1
                    continue
                if self.cancels_ignored >= self.ignore:
                    raise
                self.cancels_ignored += 1

    async def stop(self):
        pass


def read_back(bootstrap: str, topic: str, expect: int) -> list[int]:
    consumer = RdConsumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check",
                           "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([RdPartition(topic, 0, 0)])
    seen: list[int] = []
    quiet_until = None
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                if len(seen) >= expect:  # and a second more with nothing new: nothing past it either
                    quiet_until = quiet_until or time.monotonic() + 1.0
                    if time.monotonic() > quiet_until:
                        break
                continue
            assert message.error() is None, message.error()
            seen.append(int.from_bytes(message.value(), "big"))
    finally:
        consumer.close()
    return seen


async def _run_and_stop(cluster, topic: str, task: DeafTask, stop_timeout: float):
    runner, store, failures = lone_source_runner("deaf", task, {"topic": topic}, cluster.bootstrap_servers)
    await runner.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while task.next < 20 * PER_POLL and loop.time() < deadline:
        await asyncio.sleep(0.02)
    task.deaf.set()
    await asyncio.sleep(0.05)  # the poll loop is in the deaf poll now
    started = loop.time()
    await runner.stop(stop_timeout)
    took = loop.time() - started
    [stored] = await store.get("deaf", [{"p": 0}])
    return runner, failures, stored, took


async def test_a_poll_loop_that_ignores_one_cancel_still_stops_at_once(cluster_a, make_topic):
    topic = await make_topic(cluster_a, 1, "deaf-once")
    task = DeafTask()
    task.ignore = 1
    runner, failures, stored, took = await _run_and_stop(cluster_a, topic, task, stop_timeout=10.0)
    assert task.cancels_ignored == 1
    assert took < 5.0, f"the stop took {took:.1f}s: the loop was not cancelled again"
    assert not failures, failures
    assert not task.returned_after_deafness.is_set()
    seen = await asyncio.to_thread(read_back, cluster_a.bootstrap_servers, topic, stored["o"] + 1)
    assert seen == list(range(stored["o"] + 1)), (len(seen), stored)


async def test_a_poll_that_outlives_the_stop_writes_nothing_and_fails_nothing(cluster_a, make_topic, caplog):
    topic = await make_topic(cluster_a, 1, "deaf-long")
    task = DeafTask()
    task.deaf_s = 3.0  # longer than the stop's 1 s: the stop gives up on the loop and goes on
    with caplog.at_level(logging.WARNING, logger="mirrorline.runtime"):
        runner, failures, stored, _ = await _run_and_stop(cluster_a, topic, task, stop_timeout=1.0)
        async with asyncio.timeout(10):
            await task.returned_after_deafness.wait()  # the loop carries on with its records...
        await asyncio.sleep(0.5)  # ...and tries to write them
    assert not failures, failures
    assert task.cancels_ignored >= 2  # the first cancel and the one a second later
    refused = [r.getMessage() for r in caplog.records if "not reported as a failure" in r.getMessage()]
    assert len(refused) == 1 and "came after the task's stop began" in refused[0], refused
    assert runner.failed is False
    seen = await asyncio.to_thread(read_back, cluster_a.bootstrap_servers, topic, stored["o"] + 1)
    assert seen == list(range(stored["o"] + 1)), (len(seen), stored)
