"""OffsetSyncWriter follows MM2's emission rules (reference mm2.md §3.8), step by step, and sends
what is due without waiting for more records: coalesced per partition where the exact chain allows,
the newest sync of every partition out after a burst, everything flushed on close."""

from __future__ import annotations

import asyncio
import random

import pytest

from mirrorline.connectors.mirror_client.formats import OffsetSync
from mirrorline.connectors.mirror_client.offset_sync_runs import chain_of
from mirrorline.connectors.source_mirror import offset_syncs
from mirrorline.connectors.source_mirror.offset_syncs import OffsetSyncWriter

TOPIC = "mm2-offset-syncs.B.internal"


class RecordingProducer:
    """Stands in for the offset-syncs producer in this pure unit test; records what is sent.

    With ``complete=False`` the futures stay pending until the test completes them, as a broker
    that has not acknowledged yet.
    """

    def __init__(self, complete: bool = True):
        self.sent: list[OffsetSync] = []
        self.headers: list = []
        self.futures: list[asyncio.Future] = []
        self.complete = complete
        self.max_in_flight = 0

    async def send(self, topic, key, value, partition, headers=None):
        assert topic == TOPIC and partition == 0
        self.sent.append(OffsetSync.decode(key, value))
        self.headers.append(headers)
        future = asyncio.get_running_loop().create_future()
        if self.complete:
            future.set_result(None)
        self.futures.append(future)
        self.max_in_flight = max(self.max_in_flight, sum(1 for f in self.futures if not f.done()))
        return future

    def acknowledge(self, count: int | None = None) -> None:
        """Complete up to ``count`` pending sends, oldest first (all without a count)."""
        for future in [f for f in self.futures if not f.done()][:count]:
            future.set_result(None)

    def chains(self):
        return [chain_of(h) for h in self.headers]


# (upstream, downstream, synced now?) with offset.lag.max = 3
STEPS = [
    (0, 0, True),     # first record of this task's lifetime
    (1, 1, False),
    (2, 2, False),
    (3, 3, False),    # 3 - (0 + 1) = 2 < 3
    (4, 4, True),     # 4 - (0 + 1) = 3 >= offset.lag.max
    (5, 5, False),
    (7, 6, True),     # upstream skipped 6 (compaction, transaction marker): (5, 5) is synced first
    (8, 7, False),
    (9, 2, True),     # downstream went backwards (target truncated)
    (10, 3, False),
]


async def test_emission_rules_table():
    producer = RecordingProducer()
    writer = OffsetSyncWriter(producer, TOPIC, max_lag=3)
    for upstream, downstream, synced in STEPS:
        before = len(producer.sent)
        writer.record("orders", 0, upstream, downstream)
        await writer.fire_pending()
        assert (len(producer.sent) > before) == synced, (upstream, downstream)
        if synced:
            assert producer.sent[-1] == OffsetSync("orders", 0, upstream, downstream)
    assert [(s.upstream_offset, s.downstream_offset) for s in producer.sent] == [(0, 0), (4, 4), (5, 5), (7, 6),
                                                                                (9, 2)]
    assert [c.sequence for c in producer.chains()] == [0, 1, 2, 3, 4]


async def test_delayed_sync_is_sent_on_commit_and_partitions_are_independent():
    producer = RecordingProducer()
    writer = OffsetSyncWriter(producer, TOPIC, max_lag=100)
    for offset in range(5):
        writer.record("orders", 0, offset, offset)
        writer.record("orders", 1, offset + 10, offset)
    await writer.fire_pending()
    assert producer.sent == [OffsetSync("orders", 0, 0, 0), OffsetSync("orders", 1, 10, 0)]
    writer.promote_delayed()  # the task's commit(): the latest position of each partition
    await writer.fire_pending()
    assert producer.sent[2:] == [OffsetSync("orders", 0, 4, 4), OffsetSync("orders", 1, 14, 4)]
    writer.promote_delayed()
    await writer.fire_pending()
    assert len(producer.sent) == 4  # nothing new to sync


async def test_a_finished_send_sends_the_next_and_the_newest_sync_of_every_partition_goes_out(monkeypatch):
    """A burst with offset.lag.max = 0 over more partitions than send slots, acknowledged slowly: at
    most MAX_OUTSTANDING in flight (10 here), no further record or commit needed, and each
    partition's last sync written."""
    monkeypatch.setattr(offset_syncs, "MAX_OUTSTANDING", 10)
    MAX_OUTSTANDING = offset_syncs.MAX_OUTSTANDING
    producer = RecordingProducer(complete=False)
    writer = OffsetSyncWriter(producer, TOPIC, max_lag=0)
    sender = asyncio.create_task(writer.run())
    try:
        partitions, records = MAX_OUTSTANDING + 5, 1000
        for offset in range(records):
            for partition in range(partitions):
                writer.record("orders", partition, offset, offset)
            if offset % 100 == 0:
                await asyncio.sleep(0)
                producer.acknowledge(3)
        for _ in range(200):  # acknowledgements only: no more records, no commit
            await asyncio.sleep(0)
            producer.acknowledge(1)
            if not writer.queued and not writer.in_flight:
                break
        assert producer.max_in_flight <= MAX_OUTSTANDING
        last = {}
        for sync in producer.sent:
            last[sync.partition] = sync.upstream_offset
        assert last == {p: records - 1 for p in range(partitions)}
        assert len(producer.sent) < partitions * records / 10  # coalesced
    finally:
        sender.cancel()


async def test_coalescing_keeps_the_syncs_the_exact_chain_needs():
    """A sync due to a skip (or a first record, or a rewind) stays queued; lag-only ones are replaced."""
    producer = RecordingProducer()
    writer = OffsetSyncWriter(producer, TOPIC, max_lag=0)
    upstream = 0
    offsets = []
    for downstream in range(40):
        upstream += 3 if downstream in (10, 25) else 1  # two transaction markers
        offsets.append((upstream, downstream))
        writer.record("orders", 0, upstream, downstream)
    await writer.fire_pending()
    sent = [(s.upstream_offset, s.downstream_offset) for s in producer.sent]
    # the first record, the records on both sides of each marker, and the newest: the lag-only ones in between
    # are replaced
    assert sent == [offsets[0], offsets[9], offsets[10], offsets[24], offsets[25], offsets[39]]
    # a skip (upstream step != 1) never falls between two consecutive numbers
    assert [c.sequence for c in producer.chains()] == list(range(len(sent)))


async def test_past_max_queued_each_partition_keeps_its_newest_and_a_dropped_needed_sync_leaves_a_hole(monkeypatch):
    monkeypatch.setattr(offset_syncs, "MAX_QUEUED", 4)
    producer = RecordingProducer()
    writer = OffsetSyncWriter(producer, TOPIC, max_lag=0)
    for offset in range(3):  # every step skips: every sync is needed
        writer.record("orders", 0, offset * 2, offset)
        writer.record("orders", 1, offset * 2, offset)
    await writer.fire_pending()
    # the 5th queued sync overflowed the bound (partition 0's third): each partition kept its newest
    assert [(s.partition, s.upstream_offset) for s in producer.sent] == [(0, 4), (1, 2), (1, 4)]
    assert [c.sequence for c in producer.chains()] == [1, 1, 2]  # number 0 skipped: the chain broke there


async def test_the_first_commit_after_a_copy_sends_its_syncs_a_thousand_at_a_time():
    """Every copied partition's last position is due at the first commit: they go to the producer
    MAX_OUTSTANDING (1,000; MM2: 10) at a time, so it can carry them in a few requests."""
    assert offset_syncs.MAX_OUTSTANDING == 1000
    producer = RecordingProducer(complete=False)
    writer = OffsetSyncWriter(producer, TOPIC, max_lag=100)
    partitions = 2500
    for partition in range(partitions):
        for offset in range(100):  # the first record is synced at once, the last is delayed
            writer.record("orders", partition, offset, offset)
    await writer.fire_pending()
    assert len(producer.sent) == 1000
    producer.acknowledge()
    await asyncio.sleep(0)  # the acknowledgements' callbacks free the slots
    await writer.fire_pending()
    assert len(producer.sent) == 2000
    writer.promote_delayed()  # the commit
    for _ in range(6):
        producer.acknowledge()
        await asyncio.sleep(0)
        await writer.fire_pending()
    assert producer.max_in_flight == 1000
    last = {}
    for sync in producer.sent:
        last[sync.partition] = sync.upstream_offset
    assert len(producer.sent) == 2 * partitions and last == {p: 99 for p in range(partitions)}


async def test_close_sends_everything_due_and_the_latest_positions_past_the_cap_and_waits_for_them(monkeypatch):
    monkeypatch.setattr(offset_syncs, "MAX_OUTSTANDING", 10)
    MAX_OUTSTANDING = offset_syncs.MAX_OUTSTANDING
    producer = RecordingProducer(complete=False)
    writer = OffsetSyncWriter(producer, TOPIC, max_lag=100)
    for partition in range(MAX_OUTSTANDING * 2):
        for offset in range(7):
            writer.record("orders", partition, offset, offset)
    await writer.fire_pending()
    assert len(producer.sent) == MAX_OUTSTANDING
    closing = asyncio.create_task(writer.close())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not closing.done()  # waits for the acknowledgements
    producer.acknowledge()
    await asyncio.wait_for(closing, 1)
    last = {}
    for sync in producer.sent:
        last[sync.partition] = sync.upstream_offset
    assert last == {p: 6 for p in range(MAX_OUTSTANDING * 2)}  # the delayed positions too


async def test_the_first_sync_of_a_resumed_partition_says_where_it_resumed():
    producer = RecordingProducer()
    writer = OffsetSyncWriter(producer, TOPIC, max_lag=2, resume_after={("orders", 0): 41, ("orders", 1): 9,
                                                                        ("orders", 2): 5})
    writer.forget_resume("orders", 2)  # the task moved it (records lost to retention)
    for offset in range(42, 48):
        for partition in range(3):
            writer.record("orders", partition, offset, offset - 42)
    await writer.fire_pending()
    resumes = [(s.partition, c.sequence, c.resumes_after) for s, c in zip(producer.sent, producer.chains())]
    assert resumes[:3] == [(0, 0, 41), (1, 0, 9), (2, 0, None)]
    assert all(r is None for _, _, r in resumes[3:])


async def test_a_failed_send_leaves_a_hole_in_the_numbers():
    class Failing(RecordingProducer):
        async def send(self, *args, **kwargs):
            if not self.sent:
                self.sent.append(None)
                raise RuntimeError("broker said no")
            return await super().send(*args, **kwargs)

    producer = Failing()
    writer = OffsetSyncWriter(producer, TOPIC, max_lag=0, resume_after={("orders", 0): 9})
    writer.record("orders", 0, 10, 0)
    writer.record("orders", 0, 12, 1)
    await writer.fire_pending()
    assert writer.failed_sends == 1
    assert [(c.sequence, c.resumes_after) for c in producer.chains()] == [(1, None)]


async def test_a_closed_producer_under_many_syncs_is_one_warning_with_the_count(caplog):
    class Closed(RecordingProducer):
        async def send(self, *args, **kwargs):
            raise RuntimeError("ProducerClosed")

    writer = OffsetSyncWriter(Closed(), TOPIC, max_lag=0)
    for partition in range(40):
        writer.record("orders", partition, 0, 0)
    writer._closing = True  # as close() does: everything waiting is sent now
    with caplog.at_level("WARNING", logger="mirrorline.connectors.source_mirror.offset_syncs"):
        await writer.fire_pending()
    assert writer.failed_sends == 40
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("Could not send 40 offset sync(s) (orders-0, orders-1, orders-2, orders-3, orders-4, ...)")
    assert "ProducerClosed" in line


def _writer_state(writer: OffsetSyncWriter) -> tuple:
    pending = {k: [(q.sync.upstream_offset, q.sync.downstream_offset, q.needed) for q in queue]
               for k, queue in writer._pending.items()}
    delayed = {k: (s.upstream_offset, s.downstream_offset) for k, s in writer._delayed.items()}
    states = {k: (v.previous_upstream, v.previous_downstream, v.last_sync_downstream) for k, v in writer._state.items()}
    return pending, delayed, states


@pytest.mark.parametrize("max_lag", [0, 1, 3, 100])
@pytest.mark.parametrize("seed", range(5))
async def test_record_batch_gives_exactly_the_syncs_of_recording_every_record(max_lag, seed):
    """The batch path's arithmetic shortcut matches record() called record by record: same queue, same delayed."""
    rng = random.Random(seed)
    by_batch = OffsetSyncWriter(RecordingProducer(), TOPIC, max_lag)
    by_record = OffsetSyncWriter(RecordingProducer(), TOPIC, max_lag)
    upstream, downstream = rng.randrange(0, 50), rng.randrange(0, 50)
    for _ in range(60):
        count = rng.choice([1, 2, 3, 7, 50, 250])
        gaps = rng.random() < 0.2
        if gaps:  # a rebuilt batch of a compacted source: offsets listed one by one
            offsets = []
            for _ in range(count):
                upstream += rng.choice([1, 1, 2, 5])
                offsets.append(upstream)
        else:
            upstream += rng.choice([1, 1, 1, 4])  # consecutive from the last one, or after a skip
            offsets = range(upstream, upstream + count)
            upstream = offsets[-1]
        if rng.random() < 0.05:
            downstream = max(0, downstream - rng.randrange(1, 30))  # downstream went backwards
        by_batch.record_batch("t", 0, offsets, downstream)
        for i, u in enumerate(offsets):
            by_record.record("t", 0, u, downstream + i)
        downstream += count + (rng.randrange(0, 3) if rng.random() < 0.1 else 0)
        assert _writer_state(by_batch) == _writer_state(by_record)
        if rng.random() < 0.2:
            by_batch.promote_delayed()
            by_record.promote_delayed()
        if rng.random() < 0.3:
            await by_batch.fire_pending()
            await by_record.fire_pending()


async def test_a_downstream_gap_syncs_the_records_on_both_sides_of_it():
    """Beyond MM2: the commit marker of an exactly-once transaction leaves a downstream gap; the record
    before it and the one after it are both synced, so exact-translation runs end and start there."""
    producer = RecordingProducer()
    writer = OffsetSyncWriter(producer, TOPIC, max_lag=100)
    for upstream in range(0, 5):  # transaction 1: downstream 0..4, then its commit marker at 5
        writer.record("t", 0, upstream, upstream)
    for upstream in range(5, 8):  # transaction 2 from downstream 6
        writer.record("t", 0, upstream, upstream + 1)
    await writer.fire_pending()
    assert [(s.upstream_offset, s.downstream_offset) for s in producer.sent] == [(0, 0), (4, 4), (5, 6)]
    writer.record_batch("t", 0, range(8, 12), 10)  # a batch after the next marker (at 9)
    await writer.fire_pending()
    assert [(s.upstream_offset, s.downstream_offset) for s in producer.sent][3:] == [(7, 8), (8, 10)]
    assert [c.sequence for c in producer.chains()] == [0, 1, 2, 3, 4]  # all kept: none coalesced away
