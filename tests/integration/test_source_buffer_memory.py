"""A source task's unacknowledged bytes stay under its producer's ``buffer.memory``, against a real broker.

aiokafka's producer queues whatever it is given; Java's blocks ``send`` once ``buffer.memory``
bytes wait. The runtime gives a source task Java's bound (``WorkerSourceTask._wait_for_room``):
here a task hands over 300 records of 10 KB with ``buffer.memory`` at 64 KiB. The most it ever
has unacknowledged must stay under that, and every record must arrive once, in order, as
librdkafka (an independent client) reads it back.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import TopicPartition as RdPartition

from mirrorline.api import SourceRecord, SourceTask
from support.source_runner import lone_source_runner

pytestmark = pytest.mark.integration

RECORDS = 300
SIZE = 10 * 1024
LIMIT = 64 * 1024


class TenKilobyteTask(SourceTask):
    """Returns RECORDS records of SIZE bytes, 50 per poll, then nothing."""

    async def start(self, config):
        self.topic = config["topic"]
        self.next = 0

    async def poll(self):
        if self.next >= RECORDS:
            await asyncio.sleep(0.05)
            return []
        batch = [SourceRecord({"p": 0}, {"o": i}, self.topic, 0, None, i.to_bytes(4, "big") * (SIZE // 4))
                 for i in range(self.next, min(self.next + 50, RECORDS))]
        self.next += len(batch)
        return batch

    async def stop(self):
        pass


def read_back(bootstrap: str, topic: str) -> list[int]:
    consumer = RdConsumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check",
                           "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([RdPartition(topic, 0, 0)])
    seen: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                if len(seen) >= RECORDS:
                    break
                continue
            assert message.error() is None, message.error()
            seen.append(int.from_bytes(message.value()[:4], "big"))
    finally:
        consumer.close()
    return seen


async def test_unacknowledged_bytes_stay_under_buffer_memory(cluster_a, make_topic):
    topic = await make_topic(cluster_a, 1, "buffer-memory")
    runner, _, failures = lone_source_runner("buffer-memory", TenKilobyteTask(), {"topic": topic},
                                             cluster_a.bootstrap_servers, buffer_memory=LIMIT)
    most = 0
    sends = 0
    sent = runner._sent

    def counting(size: int = 0) -> None:
        nonlocal most, sends
        sent(size)
        sends += 1
        most = max(most, runner._unacked_bytes)

    runner._sent = counting
    await runner.start()
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        # every record handed to the producer, not only polled (the last poll's records go out one by
        # one as room frees up, so nothing may be unacknowledged for a moment before they all went)
        while (sends < RECORDS or runner._unacked_bytes) and loop.time() < deadline and not failures:
            await asyncio.sleep(0.05)
    finally:
        unacknowledged = runner._unacked_bytes
        await runner.stop(5.0)
    assert not failures, failures
    assert SIZE < most <= LIMIT, most  # several writes were in flight at once, never more than the bound
    seen = await asyncio.to_thread(read_back, cluster_a.bootstrap_servers, topic)
    assert seen == list(range(RECORDS)), describe_difference(seen, handed_over=runner.task.next,
                                                             unacknowledged=unacknowledged)


def describe_difference(seen: list[int], handed_over: int, unacknowledged: int) -> str:
    """What differs between the records read back and 0..RECORDS-1, in one line (a loss, a
    duplicate and a reordering call for different chases)."""
    counts = Counter(seen)
    missing = [value for value in range(RECORDS) if value not in counts]
    duplicated = sorted(value for value, count in counts.items() if count > 1)
    backwards = [i for i in range(1, len(seen)) if seen[i] < seen[i - 1]]
    return (f"read {len(seen)} of {RECORDS} records: missing {missing[:20]} ({len(missing)}), duplicated "
            f"{duplicated[:20]} ({len(duplicated)}), {len(backwards)} step(s) back at {backwards[:10]}; the task "
            f"had handed over {handed_over} and had {unacknowledged} bytes unacknowledged when stopped")
