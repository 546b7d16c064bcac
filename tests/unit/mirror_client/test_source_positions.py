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
from mirrorline.api.errors import ConfigError
from mirrorline.api.clients import Consumer
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
        #: topic IDs the cluster gives (None: it cannot tell), topic-change signs for the next call, pauses
        self.ids: dict[str, str] | None = None
        self.signs: set[str] = set()
        self.id_requests: list[set[str]] = []
        self.paused: set[TopicPartition] = set()
        #: partitions a fetch answer moved, as the next fetch_state_changes() gives them
        self.changes: set[TopicPartition] | None = None
        FakeConsumer.instances.append(self)

    def topic_change_signs(self):
        signs, self.signs = self.signs, set()
        return signs

    async def topic_ids(self, topics):
        self.id_requests.append(set(topics))
        if isinstance(self.ids, Exception):
            raise self.ids
        return None if self.ids is None else {t: i for t, i in self.ids.items() if t in set(topics)}

    def pause(self, *tps):
        self.paused.update(tps)

    def resume(self, *tps):
        self.paused.difference_update(tps)

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

    fetch_states = Consumer.fetch_states  # the API's default: one call per partition

    def fetch_state_changes(self):
        """What ``changes`` holds (None, the API's default: cannot tell), then nothing until set again."""
        changes, self.changes = self.changes, (None if self.changes is None else set())
        return changes

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

    def consumer(self, props, *, fetch_batches=None, fetch_sessions=False, gather_max_wait_ms=None,
                 gather_trickle_wait_ms=None):
        consumer = FakeConsumer(props, fetch_batches)
        consumer.gather_max_wait_ms = gather_max_wait_ms
        consumer.gather_trickle_wait_ms = gather_trickle_wait_ms
        return consumer


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
    task._next_lag_sweep = 0.0  # the next poll is the periodic sweep of every partition's lag
    await task.poll()  # nothing more: the lag gauge follows
    assert metrics.REPLICATION_LAG_RECORDS.labels("A", "B", f"A.{topic}", "0")._value.get() == 0
    consumer.stable = {tp: 19}  # a transaction open at 19: its records cannot be given yet
    consumer.highwaters = {tp: 25}
    consumer.positions[tp] = _Position(19)
    assert task.pending_records() == 0


async def test_lag_gauges_follow_partitions_with_records_every_poll_and_the_others_every_sweep(monkeypatch):
    """An idle poll does not set the lag gauge of every partition (at thousands of partitions that was
    most of an idle task's CPU); a partition with records is set at once, the others at the sweep."""
    topic = "unit-lag-sweep"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    task, consumer, _ = await started_task(monkeypatch, topic, [0, 1], stored={0: 9, 1: 4},
                                           bounds={0: (0, 10), 1: (0, 5)})

    def gauge(partition: int) -> float:
        return metrics.REPLICATION_LAG_RECORDS.labels("A", "B", f"A.{topic}", str(partition))._value.get()

    consumer.highwaters = {tp0: 10, tp1: 5}
    consumer.script = [{}]
    await task.poll()  # the first poll sweeps
    assert (gauge(0), gauge(1)) == (0, 0)
    consumer.highwaters = {tp0: 14, tp1: 8}  # new records on the source, not fetched yet
    consumer.script = [{tp0: [record(topic, 0, 10)]}]
    await task.poll()
    assert (gauge(0), gauge(1)) == (3 + 1, 0)  # 3 to fetch + 1 handed over; partition 1 waits for the sweep
    task._next_lag_sweep = 0.0
    consumer.script = [{}]
    await task.poll()
    assert (gauge(0), gauge(1)) == (4, 3)
    assert task_module.LAG_SWEEP_S >= 1.0


async def test_lag_sweep_reads_only_partitions_answered_or_acknowledged_until_the_full_sweep(monkeypatch):
    """At 8,000 partitions a sweep of every partition every LAG_SWEEP_S was a quarter of an idle
    worker's CPU. With a consumer that tells which partitions its fetch answers moved, the sweep reads
    those (for two sweeps: the records are consumed after the answer) and the acknowledged ones; every
    FULL_LAG_SWEEP_S, or when the consumer cannot tell, all."""
    topic = "unit-lag-changes"
    tps = [TopicPartition(topic, p) for p in range(3)]
    task, consumer, _ = await started_task(monkeypatch, topic, [0, 1, 2], stored={0: 9, 1: 4, 2: 0},
                                           bounds={0: (0, 10), 1: (0, 5), 2: (0, 0)})

    def gauges() -> tuple:
        return tuple(metrics.REPLICATION_LAG_RECORDS.labels("A", "B", f"A.{topic}", str(p))._value.get()
                     for p in range(3))

    read: list[set] = []
    real_fetch_states = consumer.fetch_states

    def fetch_states(partitions):
        partitions = list(partitions)
        read.append(set(partitions))
        return real_fetch_states(partitions)

    consumer.fetch_states = fetch_states
    consumer.highwaters = {tps[0]: 10, tps[1]: 5, tps[2]: 0}
    consumer.changes = set()
    await task.poll()  # the first sweep reads all
    assert read[-1] == set(tps) and gauges() == (0, 0, 0)

    def sweep_now() -> None:
        task._next_lag_sweep = 0.0

    consumer.highwaters = {tps[0]: 12, tps[1]: 7, tps[2]: 3}  # every partition grew on the source ...
    consumer.changes = {tps[1]}  # ... and an answer told of partition 1 only (so far)
    sweep_now()
    await task.poll()
    assert read[-1] == {tps[1]} and gauges() == (0, 2, 0)
    sweep_now()
    await task.poll()  # partition 1 is read once more (its records are consumed after the answer)
    assert read[-1] == {tps[1]}
    sweep_now()
    await task.poll()
    assert read[-1] == set() and gauges() == (0, 2, 0)

    consumer.script = [{tps[2]: [record(topic, 2, 0), record(topic, 2, 1)]}]
    polled = await task.poll()  # records of partition 2: its gauge is set at once, without a sweep
    assert gauges() == (0, 2, 1 + 2)
    for r in polled:
        await task.commit_record(r, RecordMetadata(f"A.{topic}", 2, r.source_offset["offset"], 0))
    sweep_now()
    await task.poll()  # acknowledged: read by the next sweep
    assert read[-1] == {tps[2]} and gauges() == (0, 2, 1)

    task._next_full_lag_sweep = 0.0  # FULL_LAG_SWEEP_S passed: all again (partition 0's growth is seen)
    sweep_now()
    await task.poll()
    assert read[-1] == set(tps) and gauges() == (2, 2, 1)
    consumer.changes = None  # a consumer that cannot tell: every sweep reads all
    sweep_now()
    await task.poll()
    assert read[-1] == set(tps)
    assert task_module.LAG_SWEEP_S < task_module.FULL_LAG_SWEEP_S <= 60.0

# --- a source topic re-created: recognised by its topic ID (KIP-516) -----------------------------------------

from mirrorline.connectors.source_mirror import task as task_module  # noqa: E402
from mirrorline.connectors.source_mirror.topic_identity import (TopicIdentities, TopicVerdict,  # noqa: E402
                                                                 judge_topic)

UNCHANGED, RECREATED, MISSING, UNKNOWN = (TopicVerdict.UNCHANGED, TopicVerdict.RECREATED, TopicVerdict.MISSING,
                                          TopicVerdict.UNKNOWN)


@pytest.mark.parametrize("known, current, supported, verdict", [
    ("id1", "id1", True, UNCHANGED),
    (None, "id1", True, UNCHANGED),      # first sight: learnt, nothing to compare with
    ("id1", "id2", True, RECREATED),
    ("id1", None, True, MISSING),        # deleted (maybe about to come back)
    (None, None, True, MISSING),
    ("id1", None, False, UNKNOWN),       # the cluster gives no IDs: today's offset checks only
])
def test_judge_topic(known, current, supported, verdict):
    assert judge_topic(known, current, supported) is verdict


def test_identities_learn_first_ids_and_keep_the_old_one_until_accepted():
    identities = TopicIdentities()
    assert identities.judge(["a", "b"], {"a": "A1"}) == {"a": UNCHANGED, "b": MISSING}
    assert identities.known == {"a": "A1"}
    assert identities.judge(["a", "b"], {"a": "A2", "b": "B1"}) == {"a": RECREATED, "b": UNCHANGED}
    assert identities.known == {"a": "A1", "b": "B1"}  # a reset not done yet is judged again next time
    assert identities.judge(["a"], {"a": "A2"}) == {"a": RECREATED}
    identities.accept("a", "A2")
    assert identities.judge(["a"], {"a": "A2"}) == {"a": UNCHANGED}
    assert identities.judge(["a"], None) == {"a": UNKNOWN}


async def recreated_task(monkeypatch, topic, stored=9, bounds=(0, 10)):
    """A task on ``topic`` partitions 0 and 1 at ``stored + 1``, whose topic had ID "old" at start."""
    original_init = FakeConsumer.__init__

    def init(self, props, fetch_batches=None):
        original_init(self, props, fetch_batches)
        self.ids = {topic: "old"}

    monkeypatch.setattr(FakeConsumer, "__init__", init)
    task, consumer, context = await started_task(monkeypatch, topic, [0, 1], stored={0: stored, 1: stored},
                                                 bounds={0: bounds, 1: bounds})
    assert consumer.id_requests == [{topic}]
    consumer.seeks.clear()
    consumer.id_requests.clear()
    return task, consumer, context


async def test_recreated_topic_grown_past_the_position_restarts_from_its_start(monkeypatch, caplog):
    """The race that lost 332 records: the new topic already holds more records than the old position, so
    the fetch at that position succeeds. A fetch error seen before (the sign) makes the task ask the ID."""
    topic = "unit-recreated-grown"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    task, consumer, context = await recreated_task(monkeypatch, topic)
    consumer.bounds = {tp0: (0, 400), tp1: (0, 400)}
    consumer.ids = {topic: "new"}
    consumer.signs = {topic}
    consumer.script = [{tp0: [record(topic, 0, 10), record(topic, 0, 11)]}]
    with caplog.at_level(logging.WARNING, logger="mirrorline.connectors.source_mirror.task"):
        assert await task.poll() == []  # records at the old position of the new topic: never handed out
    assert consumer.id_requests == [{topic}]
    assert sorted(consumer.seeks) == [(tp0, 0), (tp1, 0)]
    for p in (0, 1):
        assert counter(metrics.SOURCE_OFFSET_RESETS, topic, p, "offsets-went-backwards") == 1
    assert set(context.warnings) == {f"offsets-went-backwards:{topic}-0", f"offsets-went-backwards:{topic}-1"}
    assert "topic ID new, was old" in context.warnings[f"offsets-went-backwards:{topic}-0"]
    assert any(f"source topic {topic} partition 0 was deleted and re-created (topic ID new, was old); the task's "
               f"position 10 was in the old topic. Mirroring restarts from offset 0" in r.getMessage()
               for r in caplog.records)
    assert consumer.paused == set()
    consumer.script = [{tp0: [record(topic, 0, 0)]}]
    assert [r.source_offset for r in await task.poll()] == [{"offset": 0}]
    assert consumer.id_requests == [{topic}]  # no sign, no timer: no more requests
    assert counter(metrics.SOURCE_OFFSET_RESETS, topic, 0, "offsets-went-backwards") == 1


async def test_sign_on_an_unchanged_topic_changes_nothing(monkeypatch):
    """A leader moved (NOT_LEADER_OR_FOLLOWER) or any other sign on a live topic: same ID, records handed out."""
    topic = "unit-recreated-unchanged"
    tp0 = TopicPartition(topic, 0)
    task, consumer, context = await recreated_task(monkeypatch, topic)
    consumer.signs = {topic}
    consumer.script = [{tp0: [record(topic, 0, 10)]}]
    assert [r.source_offset for r in await task.poll()] == [{"offset": 10}]
    assert consumer.id_requests == [{topic}]
    assert consumer.seeks == [] and consumer.paused == set() and context.warnings == {}
    assert counter(metrics.SOURCE_OFFSET_RESETS, topic, 0, "offsets-went-backwards") == 0


async def test_deleted_topic_is_held_until_it_is_back(monkeypatch):
    """Deleted: partitions paused at the first record not handed out; re-created: restarted from its start;
    back with the same ID (a metadata hiccup): resumed where it stood."""
    monkeypatch.setattr(task_module, "HELD_RETRY_S", 0.0)
    topic = "unit-recreated-held"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    task, consumer, context = await recreated_task(monkeypatch, topic)
    consumer.ids = {}
    consumer.signs = {topic}
    consumer.script = [{tp0: [record(topic, 0, 10), record(topic, 0, 11)]}]
    assert await task.poll() == []
    assert consumer.paused == {tp0, tp1}
    assert consumer.seeks == [(tp0, 10), (tp1, 10)]  # tp1's position: the stored offset + 1
    assert await task.poll() == []  # still missing: still held
    assert consumer.paused == {tp0, tp1} and len(consumer.id_requests) == 2
    consumer.seeks.clear()
    consumer.ids = {topic: "new"}
    consumer.bounds = {tp0: (0, 5), tp1: (0, 500)}
    assert await task.poll() == []
    assert consumer.paused == set()
    assert sorted(consumer.seeks) == [(tp0, 0), (tp1, 0)]
    assert set(context.warnings) == {f"offsets-went-backwards:{topic}-0", f"offsets-went-backwards:{topic}-1"}

    # the same topic back after a hiccup: resumed at the held positions, nothing reported
    consumer.seeks.clear()
    consumer.ids = {}
    consumer.signs = {topic}
    consumer.script = [{tp1: [record(topic, 1, 7)]}]
    consumer.positions[tp0] = _Position(3)
    assert await task.poll() == []
    assert consumer.paused == {tp0, tp1}
    consumer.seeks.clear()
    consumer.ids = {topic: "new"}
    assert await task.poll() == []
    assert consumer.paused == set() and sorted(consumer.seeks) == [(tp0, 3), (tp1, 7)]
    assert counter(metrics.SOURCE_OFFSET_RESETS, topic, 1, "offsets-went-backwards") == 1


async def test_out_of_range_then_bounds_say_ok_but_the_id_changed(monkeypatch):
    """The second race: OFFSET_OUT_OF_RANGE at 10, then the new topic grows to 400 before the bounds are read."""
    topic = "unit-recreated-oor"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    task, consumer, context = await recreated_task(monkeypatch, topic)
    consumer.bounds = {tp0: (0, 400), tp1: (0, 400)}
    consumer.ids = {topic: "new"}
    consumer.script = [OffsetOutOfRangeError("out of range", partitions={tp0: 10})]
    assert await task.poll() == []
    assert sorted(consumer.seeks) == [(tp0, 0), (tp1, 0)]
    assert counter(metrics.SOURCE_OFFSET_RESETS, topic, 0, "offsets-went-backwards") == 1


async def test_transient_out_of_range_on_an_unchanged_topic_is_not_reset(monkeypatch):
    """OFFSET_OUT_OF_RANGE on a live topic (a lagging replica answered) whose bounds include the position."""
    topic = "unit-recreated-oor-transient"
    tp0 = TopicPartition(topic, 0)
    task, consumer, context = await recreated_task(monkeypatch, topic)
    consumer.bounds[tp0] = (0, 20)
    consumer.script = [OffsetOutOfRangeError("out of range", partitions={tp0: 10})]
    assert await task.poll() == []
    assert consumer.seeks == [] and context.warnings == {}
    assert counter(metrics.SOURCE_OFFSET_RESETS, topic, 0, "offsets-went-backwards") == 0


async def test_timer_checks_every_topic_without_a_sign(monkeypatch):
    """No fetch noticed anything: the periodic check still finds the new ID (late: duplicates, never a loss)."""
    topic = "unit-recreated-timer"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    task, consumer, context = await recreated_task(monkeypatch, topic)
    consumer.script = [{tp0: [record(topic, 0, 10)]}]
    assert len(await task.poll()) == 1 and consumer.id_requests == []  # before the timer: no request
    task._next_id_check = 0
    consumer.ids = {topic: "new"}
    consumer.bounds = {tp0: (0, 400), tp1: (0, 400)}
    consumer.script = [{tp0: [record(topic, 0, 11)]}]
    assert await task.poll() == []
    assert consumer.id_requests == [{topic}]
    assert sorted(consumer.seeks) == [(tp0, 0), (tp1, 0)]


async def test_no_topic_ids_keeps_todays_behaviour(monkeypatch):
    """Brokers before Kafka 3.1 give no IDs: signs change nothing, out-of-range is judged by the bounds alone."""
    topic = "unit-recreated-no-ids"
    tp0 = TopicPartition(topic, 0)
    task, consumer, context = await recreated_task(monkeypatch, topic)
    consumer.ids = None
    consumer.signs = {topic}
    consumer.script = [{tp0: [record(topic, 0, 10)]}]
    assert [r.source_offset for r in await task.poll()] == [{"offset": 10}]
    assert consumer.seeks == [] and consumer.paused == set() and context.warnings == {}


async def test_a_sign_is_checked_only_when_records_of_the_topic_come(monkeypatch):
    """A pause makes every topic suspect; only topics whose records are about to be handed out cost a request."""
    topic = "unit-recreated-lazy"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    task, consumer, context = await recreated_task(monkeypatch, topic)
    consumer.signs = {topic}
    consumer.script = [{}, {}]
    assert await task.poll() == [] and await task.poll() == []
    assert consumer.id_requests == []
    consumer.ids = {topic: "new"}
    consumer.bounds = {tp0: (0, 10), tp1: (0, 10)}
    consumer.script = [{tp1: [record(topic, 1, 10)]}]
    assert await task.poll() == []
    assert consumer.id_requests == [{topic}]
    assert sorted(consumer.seeks) == [(tp0, 0), (tp1, 0)]
    consumer.script = [{tp1: [record(topic, 1, 0)]}]
    assert len(await task.poll()) == 1 and consumer.id_requests == [{topic}]


async def test_source_consumer_fetches_8_mib_at_a_time_unless_the_user_says_otherwise(monkeypatch):
    """fetch.max.bytes sets what a task holds (fetched ahead, and the poll being written): 8 MiB by
    default, not Kafka's 50 MiB (docs/performance.md, "Memory: every buffer has a byte limit")."""
    topic = "unit-fetch-max-bytes"
    _, consumer, _ = await started_task(monkeypatch, topic, [0], stored={0: 0}, bounds={0: (0, 0)})
    assert consumer.kwargs["fetch_max_bytes"] == 8 * 1024 * 1024
    assert consumer.kwargs["fetch_max_wait_ms"] == 5000 and consumer.kwargs["isolation_level"] == "read_committed"
    _, consumer, _ = await started_task(monkeypatch, topic, [0], stored={0: 0}, bounds={0: (0, 0)},
                                        **{"source.consumer.fetch.max.bytes": "52428800"})
    assert consumer.kwargs["fetch_max_bytes"] == 52428800


async def test_the_fetch_gather_wait_is_the_connectors_setting(monkeypatch):
    """replication.fetch.gather.ms and replication.fetch.gather.trickle.ms reach the source consumer
    (25 and 10 unless set; 0 turns gathering off) and a negative value is refused with the
    setting's name."""
    topic = "unit-fetch-gather"
    _, consumer, _ = await started_task(monkeypatch, topic, [0], stored={0: 0}, bounds={0: (0, 0)})
    assert (consumer.gather_max_wait_ms, consumer.gather_trickle_wait_ms) == (25, 10)
    _, consumer, _ = await started_task(monkeypatch, topic, [0], stored={0: 0}, bounds={0: (0, 0)},
                                        **{"replication.fetch.gather.ms": "0",
                                           "replication.fetch.gather.trickle.ms": "3"})
    assert (consumer.gather_max_wait_ms, consumer.gather_trickle_wait_ms) == (0, 3)
    for setting in ("replication.fetch.gather.ms", "replication.fetch.gather.trickle.ms"):
        with pytest.raises(ConfigError, match=setting.replace(".", r"\.")):
            await started_task(monkeypatch, topic, [0], stored={0: 0}, bounds={0: (0, 0)}, **{setting: "-1"})
