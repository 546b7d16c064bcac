"""Positions outside the source log: the pure verdict, and what MirrorSourceTask does with it.

The task tests replace the source consumer with a scripted stand-in (no broker): they check the
fetch-time path (OffsetOutOfRangeError from getmany), the start-time check, where partitions
without a stored offset start, a user-set ``auto.offset.reset=none``, and pending_records().
"""

from __future__ import annotations

import logging

import pytest
from aiokafka.structs import ConsumerRecord

from mirrorline.api import OffsetOutOfRangeError, TopicPartition
from mirrorline.connectors.source_mirror import metrics
from mirrorline.connectors.source_mirror.positions import PositionState, check_position
from mirrorline.connectors.source_mirror.task import MirrorSourceTask
from mirrorline.api.context import OffsetReader, SourceTaskContext
from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.testing.plugin_kit import FakeKafkaClients
from mirrorline.api.records import ConnectorTaskId, RecordMetadata

OK, LOST, BACKWARDS = PositionState.OK, PositionState.LOST_TO_RETENTION, PositionState.OFFSETS_WENT_BACKWARDS


@pytest.mark.parametrize("position, log_start, log_end, state, lost, resume_at", [
    (0, 0, 0, OK, 0, 0),                 # empty partition, nothing read yet
    (100, 0, 200, OK, 0, 100),
    (150, 150, 200, OK, 0, 150),         # exactly at the log start: nothing lost
    (200, 150, 200, OK, 0, 200),         # exactly at the log end: caught up
    (100, 150, 200, LOST, 50, 150),      # [100, 150) deleted before it was copied
    (149, 150, 150, LOST, 1, 150),       # everything deleted, one record never copied
    (201, 150, 200, BACKWARDS, 0, 150),  # beyond the end: topic re-created (or truncated)
    (50, 0, 0, BACKWARDS, 0, 0),         # re-created and still empty
    (50, 10, 30, BACKWARDS, 0, 10),      # re-created, already trimmed: resume at its start
])
def test_check_position(position, log_start, log_end, state, lost, resume_at):
    check = check_position(position, log_start, log_end)
    assert (check.state, check.lost_records, check.resume_at) == (state, lost, resume_at)
    assert (check.position, check.log_start, check.log_end) == (position, log_start, log_end)


class _Position:
    """A partition's fetch position, as far as the task reads it."""

    def __init__(self, position: int):
        self.position = position
        self.has_valid_position = True


class FakeConsumer:
    """A scripted source consumer: log bounds per partition, batches or errors for getmany.

    A script step is ``{tp: [records]}`` (the position moves past the last record) or ``{tp: ([records],
    position)}`` (it moves to ``position``: transaction markers or aborted records were fetched too).
    """

    instances: list[FakeConsumer] = []

    def __init__(self, props, fetch_batches=None):
        self.kwargs, self.ignored_settings = client_kwargs(props, "consumer")  # what a real one would run with
        self.read_committed = self.kwargs.get("isolation_level") == "read_committed"
        self.principal = None
        self.bounds: dict[TopicPartition, tuple[int, int]] = {}
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.resets: list[tuple[str, tuple[TopicPartition, ...]]] = []
        self.script: list = []
        self.highwaters: dict[TopicPartition, int] = {}
        self.stable: dict[TopicPartition, int] = {}
        self.positions: dict[TopicPartition, _Position] = {}
        FakeConsumer.instances.append(self)

    async def start(self):
        pass

    async def stop(self):
        pass

    def assign(self, partitions):
        self.assigned = list(partitions)

    def assignment(self):
        return set(getattr(self, "assigned", ()))

    def seek(self, tp, offset):
        self.seeks.append((tp, offset))
        self.positions[tp] = _Position(offset)

    async def seek_to_beginning(self, *tps):
        self.resets.append(("earliest", tps))

    async def seek_to_end(self, *tps):
        self.resets.append(("latest", tps))

    async def beginning_offsets(self, tps):
        return {tp: self.bounds[tp][0] for tp in tps}

    async def end_offsets(self, tps):
        return {tp: self.bounds[tp][1] for tp in tps}

    def fetch_position(self, tp):
        state = self.positions.get(tp)
        return state.position if state is not None and state.has_valid_position else None

    async def getmany(self, *partitions, timeout_ms=0, max_records=None):
        step = self.script.pop(0) if self.script else {}
        if isinstance(step, Exception):
            raise step
        batch = {}
        for tp, records in step.items():
            records, position = records if isinstance(records, tuple) else (records, records[-1].offset + 1)
            self.positions[tp] = _Position(position)
            if records:
                batch[tp] = records
        return batch

    def highwater(self, tp):
        return self.highwaters.get(tp)

    def last_stable_offset(self, tp):
        return self.stable.get(tp)


class FakeClients(FakeKafkaClients):
    """Clients whose consumers are FakeConsumers."""

    def consumer(self, props, *, fetch_batches=None, fetch_sessions=False):
        return FakeConsumer(props, fetch_batches)


class StoredOffsets(OffsetReader):
    """Committed offsets from a dict keyed by (topic, partition)."""

    def __init__(self, stored):
        self.stored = stored

    async def offsets(self, partitions):
        return [self.stored.get((p["topic"], p["partition"])) for p in partitions]


class Context(SourceTaskContext):
    """Collects reported warnings by key."""

    def __init__(self, stored):
        self.task_id = ConnectorTaskId("unit-mirror", 0)
        self.offsets = StoredOffsets(stored)
        self.warnings: dict[str, str] = {}
        self.clients = FakeClients()

    def report_warning(self, message, key=None):
        self.warnings[key or message] = message


def record(topic, partition, offset):
    """A consumed record with a current-ish timestamp."""
    return ConsumerRecord(topic, partition, offset, 1_700_000_000_000, 0, b"k", b"v", None, 1, 1, [])


async def started_task(monkeypatch, topic, partitions, stored, bounds, **config):
    """A MirrorSourceTask started against a FakeConsumer whose log bounds are ``bounds``."""
    FakeConsumer.instances.clear()
    original_init = FakeConsumer.__init__

    def init(self, props, fetch_batches=None):
        original_init(self, props, fetch_batches)
        self.bounds = {TopicPartition(topic, p): b for p, b in bounds.items()}

    monkeypatch.setattr(FakeConsumer, "__init__", init)
    task = MirrorSourceTask()
    context = Context({(topic, p): {"offset": o} for p, o in stored.items()})
    task.initialize(context)
    await task.start({"source.cluster.alias": "A", "target.cluster.alias": "B",
                      "source.cluster.bootstrap.servers": "a:9092", "target.cluster.bootstrap.servers": "b:9092",
                      "emit.offset-syncs.enabled": "false",
                      "task.assigned.partitions": ",".join(f"{topic}-{p}" for p in partitions), "task.index": "0",
                      **config})
    return task, FakeConsumer.instances[-1], context


def counter(metric, topic, partition, *extra):
    """A counter child's current value."""
    return metric.labels("A", "B", f"A.{topic}", str(partition), *extra)._value.get()


async def test_start_reports_retention_loss_and_resumes_at_log_start(monkeypatch):
    topic = "unit-retention-start"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    task, consumer, context = await started_task(monkeypatch, topic, [0, 1], stored={0: 99, 1: 99},
                                                 bounds={0: (150, 200), 1: (0, 200)})
    assert consumer.kwargs["auto_offset_reset"] == "none"
    assert consumer.seeks == [(tp0, 100), (tp1, 100), (tp0, 150)]
    assert counter(metrics.RECORDS_LOST_TO_RETENTION, topic, 0) == 50
    assert counter(metrics.RECORDS_LOST_TO_RETENTION, topic, 1) == 0
    assert counter(metrics.SOURCE_OFFSET_RESETS, topic, 0, "lost-to-retention") == 1
    assert list(context.warnings) == [f"lost-to-retention:{topic}-0"]
    assert "[100, 150)" in context.warnings[f"lost-to-retention:{topic}-0"]
    assert consumer.resets == []


async def test_fetch_out_of_range_below_start_and_beyond_end(monkeypatch, caplog):
    topic = "unit-fetch-oor"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    task, consumer, context = await started_task(monkeypatch, topic, [0, 1], stored={0: 9, 1: 9},
                                                 bounds={0: (0, 10), 1: (0, 10)})
    assert context.warnings == {}
    consumer.seeks.clear()
    # while running: partition 0 trimmed to 40 while we were at 10; partition 1 re-created with 3 records
    consumer.bounds = {tp0: (40, 60), tp1: (0, 3)}
    consumer.script = [OffsetOutOfRangeError("out of range", partitions={tp0: 10, tp1: 10}),
                       {tp0: [record(topic, 0, 40)]}]
    with caplog.at_level(logging.WARNING, logger="mirrorline.connectors.source_mirror.task"):
        assert await task.poll() == []
    assert consumer.seeks == [(tp0, 40), (tp1, 0)]
    assert counter(metrics.RECORDS_LOST_TO_RETENTION, topic, 0) == 30
    assert counter(metrics.SOURCE_OFFSET_RESETS, topic, 1, "offsets-went-backwards") == 1
    assert counter(metrics.RECORDS_LOST_TO_RETENTION, topic, 1) == 0
    assert set(context.warnings) == {f"lost-to-retention:{topic}-0", f"offsets-went-backwards:{topic}-1"}
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"source topic {topic} partition 0, offsets [10, 40) (30 records)" in m for m in messages)
    assert any(f"source topic {topic} partition 1 ends at offset 3 but the task's position is 10" in m
               for m in messages)
    polled = await task.poll()
    assert [r.source_offset for r in polled] == [{"offset": 40}]


async def test_new_partitions_honour_user_reset_and_none_fails(monkeypatch):
    topic = "unit-new-partitions"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    _, consumer, _ = await started_task(monkeypatch, topic, [0, 1], stored={0: 4}, bounds={0: (0, 10), 1: (0, 10)})
    assert consumer.resets == [("earliest", (tp1,))]
    _, consumer, _ = await started_task(monkeypatch, topic, [0, 1], stored={}, bounds={0: (0, 10), 1: (0, 10)},
                                        **{"consumer.auto.offset.reset": "latest"})
    assert consumer.resets == [("latest", (tp0, tp1))]
    assert consumer.kwargs["auto_offset_reset"] == "none"
    # a user-set "none": the anomaly is still reported, then the task fails as Kafka's consumer would
    with pytest.raises(OffsetOutOfRangeError):
        await started_task(monkeypatch, topic, [0], stored={0: 4}, bounds={0: (8, 10)},
                           **{"source.consumer.auto.offset.reset": "none"})
    assert FakeConsumer.instances[-1].resets == []


async def test_pending_records_counts_unacknowledged_records(monkeypatch):
    topic = "unit-pending"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    task, consumer, _ = await started_task(monkeypatch, topic, [0, 1], stored={0: 9}, bounds={0: (0, 10), 1: (0, 5)})
    assert task.pending_records() is None  # no high watermark known yet
    consumer.highwaters = {tp0: 15, tp1: 5}
    assert task.pending_records() == 5  # partition 1: position unknown until its reset is resolved
    consumer.script = [{tp1: [record(topic, 1, 0), record(topic, 1, 1)]}]
    polled = await task.poll()
    assert task.pending_records() == 5 + 3 + 2  # polled but not acknowledged still counts
    for r in polled:
        await task.commit_record(r, RecordMetadata(f"A.{topic}", 1, r.source_offset["offset"], 0))
    assert task.pending_records() == 5 + 3


async def test_transaction_markers_and_aborted_records_are_not_pending(monkeypatch):
    """A transactional partition idle after its last commit: its marker takes the last offset, and an
    aborted transaction's records and marker take offsets no read_committed consumer is given."""
    topic = "unit-pending-txn"
    tp = TopicPartition(topic, 0)
    task, consumer, _ = await started_task(monkeypatch, topic, [0], stored={0: 9}, bounds={0: (0, 10)})
    # 10..12 committed (marker 13), 14..16 aborted (marker 17), 18..19 committed (marker 20): end 21
    consumer.highwaters, consumer.stable = {tp: 21}, {tp: 21}
    consumer.script = [{tp: ([record(topic, 0, o) for o in (10, 11, 12, 18, 19)], 21)}, {}]
    polled = await task.poll()
    assert task.pending_records() == 5  # fetched, not acknowledged yet
    for r in polled:
        await task.commit_record(r, RecordMetadata(f"A.{topic}", 0, r.source_offset["offset"], 0))
    assert task.pending_records() == 0
    await task.poll()  # nothing more: the lag gauge follows
    assert metrics.REPLICATION_LAG_RECORDS.labels("A", "B", f"A.{topic}", "0")._value.get() == 0
    consumer.stable = {tp: 19}  # a transaction open at 19: its records cannot be given yet
    consumer.highwaters = {tp: 25}
    consumer.positions[tp] = _Position(19)
    assert task.pending_records() == 0