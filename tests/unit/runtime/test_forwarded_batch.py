"""ForwardedBatch: an encoded record batch gets the producer's fields and a fresh CRC, records untouched."""

from __future__ import annotations

import struct

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from mirrorline.clients.forwarded_batch import ForwardedBatch, InvalidBatchError

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def encoded(codec: int = 0, *, transactional: bool = False, count: int = 5, log_append_time: bool = False) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, is_transactional=int(transactional), producer_id=77,
                                        producer_epoch=3, base_sequence=40, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None if i == 2 else f"k{i}".encode(),
                       value=None if i == 3 else f"value {i}".encode() * 10,
                       headers=[("h", f"{i}".encode()), ("n", None)])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, 123_456)  # as fetched: the source's base offset
    if log_append_time:
        data[22] |= 0x08
    return bytes(data)


def records(data: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in DefaultRecordBatch(data)]


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_producer_fields_and_crc_are_rewritten_and_records_kept(codec):
    source = encoded(codec, transactional=True)
    batch = ForwardedBatch(source, 5)
    batch._set_producer_state(9, 1, 100)
    out = bytes(batch._build())
    decoded = DefaultRecordBatch(out)
    assert decoded.validate_crc()
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (9, 1, 100)
    assert not decoded.is_transactional and not decoded.is_control_batch
    assert decoded.base_offset == 0 and struct.unpack_from(">i", out, 12)[0] == -1
    assert decoded.compression_type == codec
    assert out[61:] == source[61:]  # the records section, compressed or not, is the source's bytes
    assert [r[1:] for r in records(out)] == [r[1:] for r in records(source)]
    assert batch.record_count() == 5 and batch.size() == len(source) and batch.closed()
    assert batch.append(timestamp=None, key=b"k", value=b"v") is None


def test_without_idempotence_the_batch_carries_no_producer():
    decoded = DefaultRecordBatch(bytes(ForwardedBatch(encoded(), 5)._build()))
    assert decoded.validate_crc()
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (-1, -1, -1)


@pytest.mark.parametrize("data, count, message", [
    (b"\x00" * 20, 1, "not a magic-2 record batch"),
    (encoded() + b"\x00", 5, "does not match"),
    (encoded(), 4, "do not describe 4 records"),
    (encoded(log_append_time=True), 5, "LogAppendTime"),
])
def test_bytes_that_are_not_one_forwardable_batch_are_refused(data, count, message):
    with pytest.raises(InvalidBatchError, match=message):
        ForwardedBatch(data, count)


@pytest.mark.parametrize("source_transactional", [False, True])
def test_a_transactional_producer_forwards_with_its_own_transactional_bit(source_transactional):
    """Under exactly-once the batch carries the mirror's transactional bit (the broker requires it in a
    transactional produce request), whatever the source batch said, and the CRC covers it."""
    batch = ForwardedBatch(encoded(transactional=source_transactional), 5, transactional=True)
    batch._set_producer_state(12, 4, 7)
    decoded = DefaultRecordBatch(bytes(batch._build()))
    assert decoded.validate_crc()
    assert decoded.is_transactional and not decoded.is_control_batch
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (12, 4, 7)
    assert [r[1:] for r in records(bytes(batch._build()))] == [r[1:] for r in records(encoded())]


def test_a_bytearray_is_taken_over_and_bytes_are_copied():
    """SourceBatch's promise: bytes stay as given; a bytearray is rewritten in place (no second copy)."""
    source = encoded(0, transactional=True)
    kept = ForwardedBatch(source, 5)
    kept._set_producer_state(9, 1, 100)
    assert source == encoded(0, transactional=True) and kept._build() is not source

    buffer = bytearray(source)
    taken = ForwardedBatch(buffer, 5)
    taken._set_producer_state(9, 1, 100)
    assert taken._build() is buffer
    assert bytes(buffer) == bytes(kept._build())  # the same rewrite, done in the caller's buffer
    again = ForwardedBatch(buffer, 5)  # sent once more (a retried transaction): the same bytes again
    again._set_producer_state(9, 1, 100)
    assert bytes(again._build()) == bytes(kept._build())


def test_the_crc_follows_producer_fields_set_after_the_bytes_were_taken():
    """The CRC is written when the sender takes the bytes; fields set afterwards (a batch drained again)
    are covered by the next take, never left under a stale CRC."""
    batch = ForwardedBatch(encoded(), 5)
    first = DefaultRecordBatch(bytes(batch._build()))
    assert first.validate_crc() and first.producer_id == -1
    batch._set_producer_state(31, 2, 500)
    again = DefaultRecordBatch(bytes(batch._build()))
    assert again.validate_crc()
    assert (again.producer_id, again.producer_epoch, again.base_sequence) == (31, 2, 500)
