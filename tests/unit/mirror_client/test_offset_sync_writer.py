"""OffsetSyncWriter follows MM2's emission rules (reference mm2.md §3.8), step by step."""

from __future__ import annotations

import asyncio

import pytest

from mirrorline.connectors.mirror_client.formats import OffsetSync
from mirrorline.connectors.source_mirror.offset_syncs import MAX_OUTSTANDING, OffsetSyncWriter


class RecordingProducer:
    """Stands in for the offset-syncs producer in this pure unit test; records what is sent."""

    def __init__(self, complete: bool = True):
        self.sent: list[OffsetSync] = []
        self.headers: list = []
        self.futures: list[asyncio.Future] = []
        self.complete = complete

    async def send(self, topic, key, value, partition, headers=None):
        assert topic == "mm2-offset-syncs.B.internal" and partition == 0
        self.sent.append(OffsetSync.decode(key, value))
        self.headers.append(headers)
        future = asyncio.get_running_loop().create_future()
        if self.complete:
            future.set_result(None)
        self.futures.append(future)
        return future


# (upstream, downstream, synced now?) with offset.lag.max = 3
STEPS = [
    (0, 0, True),     # first record of this task's lifetime
    (1, 1, False),
    (2, 2, False),
    (3, 3, False),    # 3 - (0 + 1) = 2 < 3
    (4, 4, True),     # 4 - (0 + 1) = 3 >= offset.lag.max
    (5, 5, False),
    (7, 6, True),     # upstream skipped 6 (compaction, transaction marker)
    (8, 7, False),
    (9, 2, True),     # downstream went backwards (target truncated)
    (10, 3, False),
]


async def test_emission_rules_table():
    producer = RecordingProducer()
    writer = OffsetSyncWriter(producer, "mm2-offset-syncs.B.internal", max_lag=3)
    for upstream, downstream, synced in STEPS:
        before = len(producer.sent)
        writer.record("orders", 0, upstream, downstream)
        await writer.fire_pending()
        await asyncio.sleep(0)
        assert (len(producer.sent) > before) == synced, (upstream, downstream)
        if synced:
            assert producer.sent[-1] == OffsetSync("orders", 0, upstream, downstream)


async def test_delayed_sync_is_sent_on_commit_and_partitions_are_independent():
    producer = RecordingProducer()
    writer = OffsetSyncWriter(producer, "mm2-offset-syncs.B.internal", max_lag=100)
    for offset in range(5):
        writer.record("orders", 0, offset, offset)
        writer.record("orders", 1, offset + 10, offset)
    await writer.fire_pending()
    await asyncio.sleep(0)
    assert producer.sent == [OffsetSync("orders", 0, 0, 0), OffsetSync("orders", 1, 10, 0)]
    await writer.promote_delayed()  # the task's commit(): the latest position of each partition
    await asyncio.sleep(0)
    assert producer.sent[2:] == [OffsetSync("orders", 0, 4, 4), OffsetSync("orders", 1, 14, 4)]
    await writer.promote_delayed()
    assert len(producer.sent) == 4  # nothing new to sync


@pytest.mark.parametrize("partitions", [MAX_OUTSTANDING + 5])
async def test_at_most_ten_sends_in_flight_and_bursts_keep_every_sync(partitions):
    producer = RecordingProducer(complete=False)
    writer = OffsetSyncWriter(producer, "mm2-offset-syncs.B.internal", max_lag=0)
    for partition in range(partitions):
        writer.record("orders", partition, 0, 0)
    await writer.fire_pending()
    assert len(producer.sent) == MAX_OUTSTANDING
    writer.record("orders", partitions - 1, 1, 1)  # queued behind the same partition's first sync
    for future in producer.futures:
        future.set_result(None)
    await asyncio.sleep(0)
    await writer.fire_pending()
    late = producer.sent[MAX_OUTSTANDING:]
    assert len(late) == partitions - MAX_OUTSTANDING + 1
    assert late[-2:] == [OffsetSync("orders", partitions - 1, 0, 0), OffsetSync("orders", partitions - 1, 1, 1)]


async def test_queue_is_coalesced_per_partition_only_past_its_bound(monkeypatch):
    from mirrorline.connectors.source_mirror import offset_syncs

    monkeypatch.setattr(offset_syncs, "MAX_QUEUED", 4)
    producer = RecordingProducer(complete=False)
    writer = OffsetSyncWriter(producer, "mm2-offset-syncs.B.internal", max_lag=0)
    writer._outstanding = MAX_OUTSTANDING  # nothing can be sent: everything queues
    for offset in range(3):
        writer.record("orders", 0, offset, offset)
        writer.record("orders", 1, offset, offset)
    writer._outstanding = 0
    await writer.fire_pending()
    # the 5th queued sync overflowed the bound: only the newest of each partition was kept, in order
    assert [(s.partition, s.upstream_offset) for s in producer.sent] == [(1, 1), (0, 2), (1, 2)]


def _writer_state(writer: OffsetSyncWriter) -> tuple:
    pending = [(s.topic, s.partition, s.upstream_offset, s.downstream_offset, n) for s, n in writer._pending]
    delayed = {k: (s.upstream_offset, s.downstream_offset) for k, s in writer._delayed.items()}
    states = {k: (v.previous_upstream, v.previous_downstream, v.last_sync_downstream) for k, v in writer._state.items()}
    return pending, delayed, states


@pytest.mark.parametrize("max_lag", [0, 1, 3, 100])
@pytest.mark.parametrize("seed", range(5))
def test_record_batch_gives_exactly_the_syncs_of_recording_every_record(max_lag, seed):
    """The batch path's arithmetic shortcut matches record() called record by record: same queue, same delayed."""
    import random
    rng = random.Random(seed)
    by_batch = OffsetSyncWriter(RecordingProducer(), "mm2-offset-syncs.B.internal", max_lag)
    by_record = OffsetSyncWriter(RecordingProducer(), "mm2-offset-syncs.B.internal", max_lag)
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
            asyncio.run(by_batch.promote_delayed())
            asyncio.run(by_record.promote_delayed())


async def test_a_downstream_gap_syncs_the_records_on_both_sides_of_it():
    """Beyond MM2: the commit marker of an exactly-once transaction leaves a downstream gap; the record
    before it and the one after it are both synced, so exact-translation runs end and start there."""
    producer = RecordingProducer()
    writer = OffsetSyncWriter(producer, "mm2-offset-syncs.B.internal", max_lag=100)
    for upstream in range(0, 5):  # transaction 1: downstream 0..4, then its commit marker at 5
        writer.record("t", 0, upstream, upstream)
    for upstream in range(5, 8):  # transaction 2 from downstream 6
        writer.record("t", 0, upstream, upstream + 1)
    await writer.fire_pending()
    assert [(s.upstream_offset, s.downstream_offset) for s in producer.sent] == [(0, 0), (4, 4), (5, 6)]
    writer.record_batch("t", 0, range(8, 12), 10)  # a batch after the next marker (at 9)
    await writer.fire_pending()
    assert [(s.upstream_offset, s.downstream_offset) for s in producer.sent][3:] == [(7, 8), (8, 10)]
