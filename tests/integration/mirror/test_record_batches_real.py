"""split_fetched on record batches a real broker returns (cluster A, broker defaults): what it forwards, decoded
again, equals record for record what an aiokafka consumer with isolation_level="read_committed" reads —
plain, every compression type, committed and aborted transactions, a LogAppendTime topic, and a compacted
topic with offset gaps. The forwardable batches are then produced whole to another topic and read back.

Raw bytes come from FetchRequests sent through aiokafka's client with isolation_level=1 (read_committed),
once with a 1 MiB partition budget and once with 1.5 times the largest batch, which the broker fills up to a
truncated trailing batch, so the walk also meets partial batches and resumes from ``next_offset``.
"""

from __future__ import annotations

import asyncio
import struct

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.record.default_records import DefaultRecordBatch

from mirrorline.clients.fetched_batches import split_fetched
from mirrorline.clients.producer import RecordProducer

pytestmark = pytest.mark.integration

CODECS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: partition budget of the first raw fetches: a default max.partition.fetch.bytes
FULL_BUDGET = 1024 * 1024


def record(n: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    """(key, value, headers) of the n-th test record: null keys, values and header values, repeated headers."""
    key = None if n % 5 == 3 else f"key-{n}".encode()
    value = None if n % 7 == 4 else (f"value-{n}-" * 30).encode()
    headers = [] if n % 3 == 0 else [("h-b", f"{n}".encode()), ("h-a", None), ("h-b", b"")]
    return key, value, headers


async def send_batches(producer: AIOKafkaProducer, topic: str, numbers) -> None:
    """One record batch holding records ``numbers`` (aiokafka's batch API: one batch per call)."""
    batch = producer.create_batch()
    for n in numbers:
        key, value, headers = record(n)
        assert batch.append(key=key, value=value, timestamp=None, headers=headers) is not None
    await (await producer.send_batch(batch, topic, partition=0))


async def fetch_all_split(bootstrap: str, topic: str, budget: int):
    """Fetch partition 0 raw from offset 0 to its last stable offset; split every response as the mirror will."""
    tp = TopicPartition(topic, 0)
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        client.add_topic(topic)
        await client.force_metadata_update()
        node = client.cluster.leader_for_partition(tp)
        offset, batches, skipped, partial_tails = 0, [], 0, 0
        while True:
            request = FetchRequest(100, 1, max(budget, 1024), 1, [(topic, [(0, offset, budget)])])
            response = await client.send(node, request)
            [(_, [(_, error_code, _, *part)])] = response.topics
            assert error_code == 0 and response.API_VERSION >= 4
            # v4: lso, aborted, records; v5-v10: lso, log start, aborted, records; v11+: ..., preferred replica, records
            last_stable, aborted, raw = part[0], part[2] if response.API_VERSION >= 11 else part[-2], part[-1]
            if offset >= last_stable:
                return batches, offset, skipped, partial_tails
            result = split_fetched(bytes(raw), offset, aborted)
            assert not result.too_large, "the broker returns at least one whole batch (KIP-74)"
            assert result.next_offset > offset, "every fetch makes progress"
            batches.extend(result.batches)
            skipped += result.skipped_records
            offset = result.next_offset
            partial_tails += _has_partial_tail(bytes(raw))
    finally:
        await client.close()


def _has_partial_tail(raw: bytes) -> bool:
    """Whether the fetched bytes end inside a batch (the broker cut it at the budget)."""
    pos = 0
    while len(raw) - pos >= 12:
        pos += 12 + struct.unpack_from(">i", raw, pos + 8)[0]
    return pos != len(raw)


async def source_attributes(bootstrap: str, topic: str) -> list[tuple[int, int, int]]:
    """(base offset, last offset, attributes) of each batch of partition 0's first segment, from its headers."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        client.add_topic(topic)
        await client.force_metadata_update()
        node = client.cluster.leader_for_partition(TopicPartition(topic, 0))
        response = await client.send(node, FetchRequest(100, 1, 1 << 20, 1, [(topic, [(0, 0, 1 << 20)])]))
        raw = bytes(response.topics[0][1][0][-1])
    finally:
        await client.close()
    out, pos = [], 0
    while pos + 61 <= len(raw):
        base, length = struct.unpack_from(">qi", raw, pos)
        attributes, last_delta = struct.unpack_from(">hi", raw, pos + 21)
        out.append((base, base + last_delta, attributes))
        pos += 12 + length
    return out


async def read_committed(bootstrap: str, topic: str):
    """(offset, timestamp, key, value, headers) of every record a read_committed consumer reads."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        out = []
        deadline = asyncio.get_running_loop().time() + 20
        while await consumer.position(tp) < end:
            assert asyncio.get_running_loop().time() < deadline, f"read {len(out)} records, stuck before {end}"
            for records in (await consumer.getmany(tp, timeout_ms=500)).values():
                out.extend((r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records)
        return out
    finally:
        await consumer.stop()


def decoded(batches):
    """The forwarded records as (source offset, timestamp, key, value, headers), checking each batch's shape."""
    out = []
    for fb in batches:
        batch = DefaultRecordBatch(fb.data)
        assert batch.validate_crc() and batch.timestamp_type == 0 and not batch.attributes & 0x40
        records = list(DefaultRecordBatch(fb.data))
        assert [r.offset - batch.base_offset for r in records] == list(range(fb.record_count))
        assert fb.max_timestamp == max(r.timestamp for r in records)
        out.extend((source, r.timestamp, r.key, r.value, list(r.headers))
                   for source, r in zip(fb.source_offsets, records))
    return out


def codec_of(fb) -> int:
    return struct.unpack_from(">h", fb.data, 21)[0] & 0x07


async def check_split(bootstrap: str, topic: str):
    """split_fetched's output over both budgets equals the consumer's records.

    Returns the consumer's records, the 1 MiB split's batches, end offset and skipped count, and how many
    small-budget responses ended in a partial batch.
    """
    want = await read_committed(bootstrap, topic)
    assert want, "the test produced nothing readable"
    batches, end, skipped, _ = await fetch_all_split(bootstrap, topic, FULL_BUDGET)
    assert decoded(batches) == want, "forwarded records differ from the consumer's"
    small = max(len(fb.data) for fb in batches) * 3 // 2
    small_batches, small_end, small_skipped, partial_tails = await fetch_all_split(bootstrap, topic, small)
    assert decoded(small_batches) == want, f"budget {small}: forwarded records differ from the consumer's"
    assert (small_end, small_skipped) == (end, skipped)
    return want, batches, end, skipped, partial_tails


async def check_forwarded(bootstrap: str, make_topic, cluster, batches, want) -> None:
    """Produce every batch whole to a new topic; it must read back as the source records, offsets 0..n-1."""
    if not hasattr(RecordProducer, "send_record_batch"):
        pytest.skip("RecordProducer.send_record_batch (the runtime's batch producer) is not there yet")
    target = await make_topic(cluster, prefix="fwd")
    producer = RecordProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        futures = [await producer.send_record_batch(target, 0, fb.data, fb.record_count) for fb in batches]
        metadata = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    assert [m.offset for m in metadata] == [sum(fb.record_count for fb in batches[:i]) for i in range(len(batches))]
    got = await read_committed(bootstrap, target)
    assert [r[0] for r in got] == list(range(len(want)))
    assert [r[1:] for r in got] == [r[1:] for r in want]


@pytest.mark.parametrize("compression", CODECS, ids=[c or "none" for c in CODECS])
async def test_plain_and_compressed_batches_forward_their_source_bytes(cluster_a, make_topic, compression):
    topic = await make_topic(cluster_a)
    producer = AIOKafkaProducer(bootstrap_servers=cluster_a.bootstrap_servers, compression_type=compression,
                                acks="all")
    await producer.start()
    try:
        for start in range(0, 40, 8):
            await send_batches(producer, topic, range(start, start + 8))
    finally:
        await producer.stop()
    want, batches, end, skipped, partial_tails = await check_split(cluster_a.bootstrap_servers, topic)
    assert len(want) == 40 and end == 40 and skipped == 0
    assert partial_tails > 0, "the small-budget fetches should end inside a batch"
    assert len(batches) == 5 and not any(fb.reencoded for fb in batches)
    assert {codec_of(fb) for fb in batches} == {CODECS[compression]}
    await check_forwarded(cluster_a.bootstrap_servers, make_topic, cluster_a, batches, want)


async def test_transactions_forward_committed_batches_only(cluster_a, make_topic, unique_name):
    topic = await make_topic(cluster_a)
    bootstrap = cluster_a.bootstrap_servers
    txn = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique_name("txn"), compression_type="lz4")
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await txn.start()
    await plain.start()
    try:
        async with txn.transaction():                       # committed: 0-3, 4-6
            await send_batches(txn, topic, range(0, 4))
            await send_batches(txn, topic, range(4, 7))
        await send_batches(plain, topic, range(7, 10))
        await txn.begin_transaction()                       # aborted, with a plain batch in the middle
        await send_batches(txn, topic, range(10, 14))
        await send_batches(plain, topic, range(14, 16))
        await send_batches(txn, topic, range(16, 18))
        await txn.abort_transaction()
        async with txn.transaction():                       # the same producer commits again
            await send_batches(txn, topic, range(18, 21))
    finally:
        await txn.stop()
        await plain.stop()
    want, batches, end, skipped, partial_tails = await check_split(bootstrap, topic)
    values = [r[3] for r in want]
    assert values == [record(n)[1] for n in [*range(0, 10), 14, 15, *range(18, 21)]]
    assert skipped == 4 + 2 + 3, "aborted records plus commit, abort and commit markers"
    assert not any(fb.reencoded for fb in batches)
    assert {codec_of(fb) for fb in batches} == {0, 3}
    await check_forwarded(bootstrap, make_topic, cluster_a, batches, want)


async def test_log_append_time_topic_is_rebuilt_with_the_append_times(cluster_a, make_topic):
    topic = await make_topic(cluster_a, config={"message.timestamp.type": "LogAppendTime"})
    producer = AIOKafkaProducer(bootstrap_servers=cluster_a.bootstrap_servers, compression_type="zstd", acks="all")
    await producer.start()
    try:
        for start in range(0, 12, 4):
            await send_batches(producer, topic, range(start, start + 4))
            await asyncio.sleep(0.01)
    finally:
        await producer.stop()
    want, batches, _, _, _ = await check_split(cluster_a.bootstrap_servers, topic)
    assert len(want) == 12 and all(fb.reencoded for fb in batches)
    assert {codec_of(fb) for fb in batches} == {4}
    assert len({r[1] for r in want}) == 3, "one log-append time per batch"
    await check_forwarded(cluster_a.bootstrap_servers, make_topic, cluster_a, batches, want)


async def test_compacted_topic_with_offset_gaps(cluster_a, make_topic):
    topic = await make_topic(cluster_a, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0"})
    bootstrap = cluster_a.bootstrap_servers
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", acks="all")
    await producer.start()
    try:
        batch = producer.create_batch()                     # offsets 0-9: k0..k9
        for n in range(10):
            batch.append(key=f"k{n}".encode(), value=f"first-{n}-".encode() * 20, timestamp=None)
        await (await producer.send_batch(batch, topic, partition=0))
        batch = producer.create_batch()                     # offsets 10-13: k1, k3, k5 again, k7 deleted
        for n in (1, 3, 5):
            batch.append(key=f"k{n}".encode(), value=f"second-{n}-".encode() * 20, timestamp=None)
        batch.append(key=b"k7", value=None, timestamp=None)
        await (await producer.send_batch(batch, topic, partition=0))
        await asyncio.sleep(0.3)
        batch = producer.create_batch()                     # offset 14 rolls the segment holding 0-13
        batch.append(key=b"k99", value=b"roll", timestamp=None)
        await (await producer.send_batch(batch, topic, partition=0))
        deadline = asyncio.get_running_loop().time() + 30
        while [r[0] for r in await read_committed(bootstrap, topic)][:2] == [0, 1]:
            if asyncio.get_running_loop().time() > deadline:
                pytest.skip("the log cleaner did not compact the topic within 30 s (broker default "
                            "log.cleaner.backoff.ms=15 s); nothing to check")
            await asyncio.sleep(1)
    finally:
        await producer.stop()
    want, batches, end, _, _ = await check_split(bootstrap, topic)
    assert [r[0] for r in want] == [0, 2, 4, 6, 8, 9, 10, 11, 12, 13, 14] and end == 15
    assert [r[3] for r in want][-2:] == [None, b"roll"], "the tombstone (k7, offset 13) is still there"
    # the cleaner leaves gaps in batch 0-9 and marks 10-13 (it holds a tombstone) with a delete horizon
    # (one fetch reads one segment: the cleaned one, 0-13)
    assert await source_attributes(bootstrap, topic) == [(0, 9, 0x01), (10, 13, 0x41)]
    assert [(fb.source_offsets, fb.reencoded) for fb in batches] == [
        ([0, 2, 4, 6, 8, 9], True), (range(10, 14), True), (range(14, 15), False)]
    assert {codec_of(fb) for fb in batches} == {1}
    await check_forwarded(bootstrap, make_topic, cluster_a, batches, want)
