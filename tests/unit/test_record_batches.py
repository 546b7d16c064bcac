"""Unit tests of mirrorline.clients.fetched_batches.split_fetched: what comes out, decoded again with
aiokafka, is what a read_committed consumer reads from the source bytes, record for record.

Source batches are built with aiokafka's builders and then given the header fields a broker writes
(base offset, LogAppendTime, transactional/control bits, producer id, delete horizon, offset gaps left
by compaction), with the CRC recomputed as the broker would.
"""

from __future__ import annotations

import struct
import time
import zlib

import crc32c
import pytest
from aiokafka.consumer.fetcher import READ_COMMITTED, PartitionRecords
from mirrorline.api import CorruptRecordError
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import TopicPartition

from mirrorline.clients.fetched_batches import SplitResult, coalesce, split_fetched

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
T0 = 1_700_000_000_000


def record(n: int) -> tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    """A source record (timestamp, key, value, headers) with nulls and header order varying with n."""
    key = None if n % 5 == 3 else f"key-{n}".encode()
    value = None if n % 7 == 4 else (f"value-{n}-" * 20).encode()
    headers = [] if n % 3 == 0 else [("h-b", f"{n}".encode()), ("h-a", None), ("h-b", b"")]
    return T0 + 10 * n - (n % 4) * 3, key, value, headers


def v2_batch(base_offset: int, records, *, codec: int = 0, deltas: list[int] | None = None,
             last_delta: int | None = None, log_append_time: int | None = None, producer_id: int = -1,
             transactional: bool = False, control: bool = False, delete_horizon: int | None = None) -> bytes:
    """One magic-2 batch as a broker stores it; ``deltas`` leave gaps, ``last_delta`` a removed tail."""
    deltas = list(range(len(records))) if deltas is None else deltas
    builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 2 ** 30)
    for delta, (timestamp, key, value, headers) in zip(deltas, records):
        builder.append(delta, timestamp, key, value, headers)
    batch = bytearray(builder.build())
    assert batch[22] & 0x07 == codec, "aiokafka did not compress: make the test values more compressible"
    struct.pack_into(">q", batch, 0, base_offset)
    struct.pack_into(">i", batch, 12, 5)                          # partitionLeaderEpoch
    attributes = struct.unpack_from(">h", batch, 21)[0]
    if log_append_time is not None:
        attributes |= 0x08
        struct.pack_into(">q", batch, 35, log_append_time)
    if transactional:
        attributes |= 0x10
    if control:
        attributes |= 0x20
    if delete_horizon is not None:
        attributes |= 0x40
        first = struct.unpack_from(">q", batch, 27)[0]
        struct.pack_into(">q", batch, 27, delete_horizon)     # record timestamps stay base + delta
        assert first != delete_horizon
    struct.pack_into(">h", batch, 21, attributes)
    if last_delta is not None:
        struct.pack_into(">i", batch, 23, last_delta)
    if producer_id >= 0:
        struct.pack_into(">qhi", batch, 43, producer_id, 3, 0)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def control_batch(offset: int, producer_id: int, commit: bool) -> bytes:
    """A transaction marker as the broker writes it: one control record, key (version 0, type)."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    return v2_batch(offset, [(T0, key, value, [])], producer_id=producer_id, transactional=True, control=True)


def decode(data: bytes):
    """The single batch in ``data``: (batch header facts, [(delta, timestamp, key, value, headers)])."""
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    length = struct.unpack_from(">i", data, 8)[0]
    assert length + 12 == len(data), "data must be exactly one batch"
    header = {"base": batch.base_offset, "codec": batch.compression_type, "type": batch.timestamp_type,
              "transactional": batch.is_transactional, "last_delta": batch.last_offset_delta,
              "max_ts": batch.max_timestamp, "count": struct.unpack_from(">i", data, 57)[0],
              "attributes": batch.attributes}
    return header, [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


def forwarded(result):
    """Every record of the result as (source offset, timestamp, key, value, headers), checking each batch."""
    out = []
    for fb in result.batches:
        header, records = decode(fb.data)
        assert header["type"] == 0 and not header["attributes"] & 0x40
        assert [r[0] - header["base"] for r in records] == list(range(fb.record_count)) \
            == list(range(header["count"])), "offset deltas 0..n-1"
        if fb.reencoded:
            assert header["base"] == 0 and not header["transactional"]
        assert header["last_delta"] == fb.record_count - 1
        assert len(fb.source_offsets) == fb.record_count
        assert fb.max_timestamp == max(r[1] for r in records)
        out.extend((source, *r[1:]) for source, r in zip(fb.source_offsets, records))
    return out


def consumer_view(raw: bytes, fetch_offset: int, aborted=None, read_committed=True):
    """What aiokafka's own fetcher logic (a read_committed consumer) returns for the same bytes."""
    records = PartitionRecords(TopicPartition("t", 0), MemoryRecords(raw), list(aborted or []), fetch_offset,
                               None, None, True, READ_COMMITTED if read_committed else 0)
    # aiokafka says None where the Java consumer says -1 (NO_TIMESTAMP, magic 0)
    out = [(r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value, list(r.headers)) for r in records]
    return out, records.next_fetch_offset


def expected(base: int, ns, deltas=None, timestamp=None):
    deltas = list(range(len(ns))) if deltas is None else deltas
    return [(base + d, timestamp if timestamp is not None else record(n)[0], *record(n)[1:])
            for d, n in zip(deltas, ns)]


# ---------------------------------------------------------------------------------------
# header-only forward
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_plain_batches_are_forwarded_as_their_source_bytes(codec):
    b1 = v2_batch(100, [record(n) for n in range(5)], codec=codec)
    b2 = v2_batch(105, [record(n) for n in range(5, 12)], codec=codec)
    result = split_fetched(b1 + b2, 100, None)
    assert [fb.data for fb in result.batches] == [b1, b2]
    assert [fb.reencoded for fb in result.batches] == [False, False]
    assert [fb.source_offsets for fb in result.batches] == [range(100, 105), range(105, 112)]
    assert [fb.record_count for fb in result.batches] == [5, 7]
    assert result.next_offset == 112 and result.skipped_records == 0 and not result.too_large
    assert forwarded(result) == expected(100, range(12))
    assert [decode(fb.data)[0]["codec"] for fb in result.batches] == [codec, codec]
    assert forwarded(result) == consumer_view(b1 + b2, 100)[0]


def test_each_batch_is_a_bytearray_of_its_own_and_the_fetched_bytes_stay_as_they_were():
    """The producer takes a bytearray over (rewrites its header in place): the one copy per batch
    is made here, and never shares memory with the fetched bytes or another batch."""
    b1, b2 = v2_batch(0, [record(n) for n in range(3)]), v2_batch(3, [record(n) for n in range(2)])
    raw = b1 + b2
    batches = split_fetched(raw, 0, None).batches
    assert [type(fb.data) for fb in batches] == [bytearray, bytearray]
    assert [bytes(fb.data) for fb in batches] == [b1, b2]
    batches[0].data[0:8] = b"\xff" * 8
    assert raw == b1 + b2 and bytes(batches[1].data) == b2


# ---------------------------------------------------------------------------------------
# rebuilt batches
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_fetch_offset_inside_the_first_batch_drops_the_earlier_records(codec):
    b1 = v2_batch(100, [record(n) for n in range(6)], codec=codec)
    b2 = v2_batch(106, [record(n) for n in range(6, 9)], codec=codec)
    result = split_fetched(b1 + b2, 103, None)
    first, second = result.batches
    assert first.reencoded and first.source_offsets == range(103, 106) and first.record_count == 3
    assert decode(first.data)[0]["codec"] == codec, "a rebuilt batch keeps the source codec"
    assert not second.reencoded and second.data == b2
    assert forwarded(result) == expected(103, range(3, 9))
    assert (forwarded(result), result.next_offset) == consumer_view(b1 + b2, 103)


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_compacted_batch_with_offset_gaps_lists_the_real_source_offsets(codec):
    deltas = [0, 2, 3, 7, 8]
    raw = v2_batch(40, [record(n) for n in range(5)], codec=codec, deltas=deltas, last_delta=9)
    result = split_fetched(raw, 40, None)
    [fb] = result.batches
    assert fb.reencoded and fb.source_offsets == [40, 42, 43, 47, 48]
    assert result.next_offset == 50, "the next fetch starts after the batch's last offset, removed tail included"
    assert decode(fb.data)[0]["codec"] == codec
    assert forwarded(result) == expected(40, range(5), deltas)
    assert (forwarded(result), result.next_offset) == consumer_view(raw, 40)


def test_compacted_batch_without_its_tail_keeps_a_range_of_offsets():
    raw = v2_batch(10, [record(n) for n in range(3)], last_delta=6)
    result = split_fetched(raw, 10, None)
    [fb] = result.batches
    assert fb.reencoded and fb.source_offsets == range(10, 13) and result.next_offset == 17


@pytest.mark.parametrize("codec", [0, 4], ids=["none", "zstd"])
def test_log_append_time_batch_is_rebuilt_as_create_time_with_the_append_time(codec):
    append_time = T0 + 999_999
    raw = v2_batch(0, [record(n) for n in range(4)], codec=codec, log_append_time=append_time)
    result = split_fetched(raw, 0, None)
    [fb] = result.batches
    assert fb.reencoded and fb.max_timestamp == append_time
    assert forwarded(result) == expected(0, range(4), timestamp=append_time)
    assert forwarded(result) == consumer_view(raw, 0)[0]


def test_delete_horizon_batch_keeps_the_record_timestamps():
    records = [record(n) for n in range(4)]
    horizon = T0 + 86_400_000
    raw = v2_batch(7, records, delete_horizon=horizon)
    result = split_fetched(raw, 7, None)
    [fb] = result.batches
    assert fb.reencoded
    shift = horizon - records[0][0]                 # timestamps read as horizon + delta
    assert forwarded(result) == [(7 + i, ts + shift, k, v, h) for i, (ts, k, v, h) in enumerate(records)]
    assert forwarded(result) == consumer_view(raw, 7)[0]


def test_empty_batches_are_not_emitted_but_consumed():
    empty = v2_batch(0, [], last_delta=4)
    follows = v2_batch(5, [record(1)])
    result = split_fetched(empty + follows, 0, None)
    assert [fb.source_offsets for fb in result.batches] == [range(5, 6)] and result.next_offset == 6
    result = split_fetched(empty, 0, None)
    assert result.batches == [] and result.next_offset == 5 and not result.too_large
    only_earlier = v2_batch(5, [record(0)], deltas=[0], last_delta=2)        # records 6, 7 compacted away
    result = split_fetched(only_earlier, 6, None)
    assert result.batches == [] and result.next_offset == 8


# ---------------------------------------------------------------------------------------
# transactions and control batches
# ---------------------------------------------------------------------------------------

def transactional_log():
    """pid 7 commits [0..3] and [5..6]; pid 8 aborts [2..?]; pid 8 later commits; a plain batch between."""
    parts = [
        v2_batch(0, [record(0), record(1)], producer_id=7, transactional=True),        # 0-1   committed
        v2_batch(2, [record(2), record(3)], producer_id=8, transactional=True),        # 2-3   aborted
        v2_batch(4, [record(4)], producer_id=7, transactional=True),                   # 4     committed
        control_batch(5, 7, commit=True),                                              # 5
        v2_batch(6, [record(6), record(7)]),                                           # 6-7   plain
        v2_batch(8, [record(8)], producer_id=8, transactional=True),                   # 8     aborted
        control_batch(9, 8, commit=False),                                             # 9
        v2_batch(10, [record(10), record(11)], producer_id=8, transactional=True),     # 10-11 committed
        control_batch(12, 8, commit=True),                                             # 12
        v2_batch(13, [record(13)], producer_id=9),                                     # 13    idempotent
    ]
    return b"".join(parts), [(8, 2)]


def test_read_committed_skips_aborted_and_control_batches_like_the_consumer():
    raw, aborted = transactional_log()
    result = split_fetched(raw, 0, aborted)
    want = expected(0, [0, 1]) + expected(4, [4]) + expected(6, [6, 7]) + expected(10, [10, 11]) \
        + expected(13, [13])
    assert forwarded(result) == want
    assert (want, 14) == consumer_view(raw, 0, aborted)
    assert result.next_offset == 14
    assert result.skipped_records == 2 + 1 + 3, "aborted records 2-3 and 8 plus three markers"
    assert all(not fb.reencoded for fb in result.batches), "committed batches forward their source bytes"


def test_aborted_batches_at_the_end_still_move_the_position():
    raw, aborted = transactional_log()
    cut = raw[:raw.index(v2_batch(10, [record(10), record(11)], producer_id=8, transactional=True))]
    result = split_fetched(cut, 0, aborted)
    assert result.next_offset == 10 and forwarded(result)[-1][0] == 7


def test_read_uncommitted_returns_aborted_records_but_never_control_batches():
    raw, aborted = transactional_log()
    result = split_fetched(raw, 0, aborted, read_committed=False)
    assert [r[0] for r in forwarded(result)] == [0, 1, 2, 3, 4, 6, 7, 8, 10, 11, 13]
    assert result.skipped_records == 3
    assert forwarded(result) == consumer_view(raw, 0, aborted, read_committed=False)[0]


def test_committed_batch_cut_by_the_fetch_offset_is_rebuilt_not_transactional():
    raw, aborted = transactional_log()
    result = split_fetched(raw, 1, aborted)
    first = result.batches[0]
    assert first.reencoded and first.source_offsets == range(1, 2)
    assert not decode(first.data)[0]["transactional"] and decode(first.data)[0]["base"] == 0
    assert (forwarded(result), result.next_offset) == consumer_view(raw, 1, aborted)


def test_only_control_batches_give_no_batch_and_a_new_position():
    raw = control_batch(20, 7, commit=True) + control_batch(21, 8, commit=False)
    result = split_fetched(raw, 20, [(8, 21)])
    assert result.batches == [] and result.next_offset == 22 and result.skipped_records == 2


# ---------------------------------------------------------------------------------------
# truncation and corruption
# ---------------------------------------------------------------------------------------

def test_trailing_partial_batch_is_left_for_the_next_fetch():
    b1 = v2_batch(0, [record(n) for n in range(3)])
    b2 = v2_batch(3, [record(n) for n in range(3, 6)])
    for cut in (1, 11, 12, 30, len(b2) - 1):
        result = split_fetched(b1 + b2[:cut], 0, None)
        assert [fb.data for fb in result.batches] == [b1] and result.next_offset == 3 and not result.too_large


def test_no_complete_batch_means_the_fetch_size_is_too_small():
    b1 = v2_batch(0, [record(n) for n in range(3)])
    result = split_fetched(b1[:-1], 0, None)
    assert result == type(result)([], 0, 0, True)
    assert not split_fetched(b"", 0, None).too_large


@pytest.mark.parametrize("where", [25, 70, -1], ids=["header", "first-record", "last-byte"])
def test_corrupt_batch_raises_naming_its_offsets(where):
    good = v2_batch(0, [record(0)])
    bad = bytearray(v2_batch(1, [record(n) for n in range(1, 4)], codec=1))
    bad[where] ^= 0x01
    with pytest.raises(CorruptRecordError, match=r"offsets 1\.\."):
        split_fetched(good + bytes(bad), 0, None)
    if where != 25:        # with the header intact, nothing else stops it
        assert len(split_fetched(good + bytes(bad), 0, None, check_crcs=False).batches) == 2


def test_unknown_magic_is_corrupt():
    batch = bytearray(v2_batch(0, [record(0)]))
    batch[16] = 3
    with pytest.raises(CorruptRecordError, match="unknown magic 3"):
        split_fetched(bytes(batch), 0, None)


def test_legacy_and_v2_batches_in_one_fetch():
    raw = legacy_set(1, 1, 0, range(3)) + v2_batch(3, [record(n) for n in range(3, 6)])
    result = split_fetched(raw, 0, None)
    assert [fb.reencoded for fb in result.batches] == [True, False] and result.next_offset == 6
    # (aiokafka's Cython MemoryRecords fails on this mix, its pure-Python one does not: no consumer_view here)
    assert forwarded(result) == [(n, *record(n)[:3], []) for n in range(3)] + expected(3, range(3, 6))


def test_impossible_sizes_are_corrupt():
    with pytest.raises(CorruptRecordError, match="minimum record overhead"):
        split_fetched(struct.pack(">qi", 0, 3) + b"\x00" * 20, 0, None)
    short = bytearray(v2_batch(0, [record(0)]))
    struct.pack_into(">i", short, 8, 40)
    with pytest.raises(CorruptRecordError, match="batch header"):
        split_fetched(bytes(short[:52]), 0, None)


# ---------------------------------------------------------------------------------------
# legacy message sets
# ---------------------------------------------------------------------------------------

def legacy_set(magic: int, codec: int, base: int, ns, log_append_time: int | None = None) -> bytes:
    """Messages ``base..`` as a broker stored them in format v0/v1 (a wrapper when compressed)."""
    builder = LegacyRecordBatchBuilder(magic, codec, 2 ** 30)
    for i, n in enumerate(ns):
        timestamp, key, value, _ = record(n)
        inner = i if magic == 1 and codec else base + i          # v1 wrappers hold relative offsets
        builder.append(inner, timestamp if magic else None, key, value)
    data = bytearray(builder.build())
    if codec:
        struct.pack_into(">q", data, 0, base + len(ns) - 1)      # the wrapper carries the last offset
        if log_append_time is not None:
            data[17] |= 0x08
            struct.pack_into(">q", data, 18, log_append_time)
            struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    return bytes(data)


@pytest.mark.parametrize("magic,codec", [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)])
def test_legacy_messages_are_converted_to_v2(magic, codec):
    raw = legacy_set(magic, codec, 50, range(4))
    result = split_fetched(raw, 51, None)
    assert all(fb.reencoded for fb in result.batches)
    assert result.next_offset == 54
    want = [(50 + i, record(n)[0] if magic else -1, *record(n)[1:3], []) for i, n in enumerate(range(4))][1:]
    assert forwarded(result) == want
    assert {decode(fb.data)[0]["codec"] for fb in result.batches} == {codec}
    assert (forwarded(result), result.next_offset) == consumer_view(raw, 51)


def test_legacy_log_append_time_wrapper_gives_its_time_to_every_record():
    raw = legacy_set(1, 1, 0, range(3), log_append_time=T0 + 5)
    assert [r[1] for r in forwarded(split_fetched(raw, 0, None))] == [T0 + 5] * 3


def test_corrupt_legacy_message_raises():
    raw = bytearray(legacy_set(1, 0, 0, range(2)))
    raw[30] ^= 0x01
    with pytest.raises(CorruptRecordError, match="offset 0"):
        split_fetched(bytes(raw), 0, None)


# ---------------------------------------------------------------------------------------
# cost of the header-only path (printed, not asserted)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [0, 3], ids=["none", "lz4"])
def test_header_only_cost_is_printed(codec, capsys):
    """One fetch of ~1 MiB (a default max.partition.fetch.bytes) of 16 × 1000 B batches, best of 20 runs."""
    values = [(f"{i:08d}" + "x" * 992).encode() for i in range(16)]
    batches = [v2_batch(16 * b, [(T0, None, v, []) for v in values], codec=codec) for b in range(64)]
    raw = b"".join(batches)
    for check in (True, False):
        best = float("inf")
        for _ in range(20):
            start = time.perf_counter()
            result = split_fetched(raw, 0, None, check_crcs=check)
            best = min(best, time.perf_counter() - start)
            assert [fb.data for fb in result.batches] == batches and not any(fb.reencoded for fb in result.batches)
        with capsys.disabled():
            print(f"\nheader-only split, codec {codec}, {len(raw) / 64 / 1024:.1f} KiB batches, check_crcs={check}: "
                  f"{best / 64 * 1e6:.2f} µs per batch ({16 * 64 / best / 1e6:.2f} M records/s)")


# ---------------------------------------------------------------------------------------
# coalesce: small batches merged
# ---------------------------------------------------------------------------------------

def small_batches_log(codecs, per_batch=1):
    """Consecutive batches of ``per_batch`` records each, one per codec given, from offset 0."""
    raw, n = b"", 0
    for codec in codecs:
        raw += v2_batch(n, [record(n + i) for i in range(per_batch)], codec=codec)
        n += per_batch
    return raw, n


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_small_batches_are_merged_in_order_with_their_codec(codec):
    raw, n = small_batches_log([codec] * 40, per_batch=3)
    split = split_fetched(raw, 0, None)
    merged = coalesce(split.batches, 1 << 20)
    assert len(split.batches) == 40 and len(merged) == 1
    only = merged[0]
    assert only.reencoded and only.record_count == n and only.source_offsets == range(0, n)
    assert decode(only.data)[0]["codec"] == codec
    assert forwarded(SplitResult(merged, 0, 0, False)) == forwarded(split) == expected(0, range(n))


def test_runs_break_at_the_size_limit_and_where_the_codec_changes():
    raw, n = small_batches_log([0] * 10 + [4] * 10 + [0] * 2)
    split = split_fetched(raw, 0, None)
    source = {b.source_offsets[0]: b for b in split.batches}         # one record per source batch
    limit = len(split.batches[0].data) * 4
    merged = coalesce(split.batches, limit)
    assert forwarded(SplitResult(merged, 0, 0, False)) == expected(0, range(n))
    runs = [[source[offset] for offset in b.source_offsets] for b in merged]
    for out, run in zip(merged, runs):
        codecs = {decode(b.data)[0]["codec"] for b in run}
        assert codecs == {decode(out.data)[0]["codec"]}, "a merged batch mixes codecs"
        assert sum(len(b.data) for b in run) <= limit
    for run, following in zip(runs, runs[1:]):  # a run ends only where the next batch would not fit
        nxt = following[0]
        same_codec = decode(nxt.data)[0]["codec"] == decode(run[-1].data)[0]["codec"]
        assert not same_codec or sum(len(b.data) for b in run) + len(nxt.data) > limit
    assert len(merged) < len(split.batches)


def test_large_batches_are_kept_and_gaps_in_offsets_survive_a_merge():
    big = v2_batch(0, [record(i) for i in range(50)])
    gapped = v2_batch(50, [record(50), record(51)], deltas=[0, 3])   # a compacted batch: offsets 50, 53
    small = v2_batch(54, [record(54)])
    split = split_fetched(big + gapped + small, 0, None)
    merged = coalesce(split.batches, len(big))
    assert merged[0] is split.batches[0] and not merged[0].reencoded
    assert merged[1].source_offsets == [50, 53, 54]
    assert forwarded(SplitResult(merged, 0, 0, False)) == forwarded(split)


def test_coalescing_off_or_nothing_to_merge_returns_the_batches():
    raw, _ = small_batches_log([0] * 3)
    batches = split_fetched(raw, 0, None).batches
    assert coalesce(batches, 0) == batches
    assert coalesce(batches[:1], 1 << 20) == batches[:1]
