"""What a poll returned is let go of item by item, not held whole until its last item is written.

A mirror task's poll can return tens of MiB of batches while its producer takes at most
``buffer.memory`` at a time. Measured at 8,000 partitions (docs/performance.md, "Where the peak RSS
comes from"), holding the whole poll, and the fetched batches beside their merged copies, was a
large share of the worker's peak memory. Without a broker: the consumer's wrapper over a stand-in
aiokafka consumer, and :class:`WorkerSourceTask` with a producer that notes what it was given.
"""

from __future__ import annotations

import asyncio

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.structs import TopicPartition as AioPartition

from mirrorline.api import ConnectorTaskId, SourceRecord, SourceTask
from mirrorline.api.clients import BatchFetch
from mirrorline.api.kafka import FetchedBatch, TopicPartition
from mirrorline.clients.consumer import KafkaConsumer
from mirrorline.runtime.worker_task import handed_on
from support.herder_fakes import FakeRecordProducer, source_task_runner

TASK = ConnectorTaskId("handover", 0)


def test_handed_on_yields_in_order_and_the_list_lets_go_of_each_item_as_it_is_yielded():
    records = ["a", "b", "c"]
    seen = []
    for item in handed_on(records):
        seen.append((item, list(records)))
    assert seen == [("a", [None, "b", "c"]), ("b", [None, None, "c"]), ("c", [None, None, None])]
    assert list(handed_on(None)) == [] and list(handed_on(("x", "y"))) == ["x", "y"]  # not a list: as it is


class ThreePolledRecords(SourceTask):
    """Returns three records once, and keeps the list it returned (only so the test can look at it)."""

    async def start(self, config):
        self.returned = None

    async def poll(self):
        await asyncio.sleep(0.01)
        if self.returned is not None:
            return []
        self.returned = [SourceRecord({"p": 0}, {"o": n}, "orders", 0, b"k", b"v%d" % n) for n in range(3)]
        return self.returned

    async def stop(self):
        pass


async def test_the_runtime_lets_go_of_each_polled_record_once_the_producer_has_it(monkeypatch):
    task = ThreePolledRecords()
    seen: list[list] = []

    class NotingProducer(FakeRecordProducer):
        """Acknowledges every record, and notes what the poll's list still held when it was given one."""

        async def send(self, topic, **kwargs):
            seen.append([record is not None for record in task.returned])
            return await super().send(topic, **kwargs)

    monkeypatch.setattr("mirrorline.runtime.worker_task.KafkaProducer", NotingProducer)
    runner = source_task_runner(TASK, task)
    await runner.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while len(seen) < 3 and loop.time() < deadline:
        await asyncio.sleep(0.01)
    await runner.stop(0.5)
    # the record being written, and every one before it, is no longer held by the poll's list
    assert seen == [[False, True, True], [False, False, True], [False, False, False]]


def small_batch(base_offset: int, count: int) -> FetchedBatch:
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2 ** 30)
    for delta in range(count):
        builder.append(delta, 1_700_000_000_000 + delta, None, b"v" * 100, [])
    return FetchedBatch(bytearray(builder.build()), range(base_offset, base_offset + count), count,
                        1_700_000_000_000 + count - 1, False)


async def test_merged_batches_are_returned_without_the_consumer_keeping_the_fetched_ones():
    consumer = KafkaConsumer({"bootstrap_servers": "127.0.0.1:9"},
                             fetch_batches=BatchFetch(coalesce_bytes=64 * 1024))
    fetched = {AioPartition("orders", p): [small_batch(0, 2), small_batch(2, 3)] for p in range(2)}

    async def getmany(*partitions, timeout_ms=0, max_records=None):
        return fetched

    consumer._consumer.getmany = getmany
    try:
        out = await consumer.getmany()
    finally:
        await consumer.stop()  # never started: this only closes it, which aiokafka wants even then
    assert list(out) == [TopicPartition("orders", 0), TopicPartition("orders", 1)]
    assert [[batch.record_count for batch in batches] for batches in out.values()] == [[5], [5]]  # merged
    assert fetched == {}  # the fetched batches were let go of, partition by partition
