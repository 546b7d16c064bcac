"""The v2 record-batch header: layout, attribute bits and CRC-32C, as pure bytes. The one codec.

Batch capture (:mod:`.fetched_batches`, reading what a broker sent) and batch forwarding
(:mod:`.forwarded_batch`, handing a batch to the producer) both read and write record batches
through this module. It lives in the client layer, not in the plugin contract, because both of
its users are here: a plugin sees only :class:`~mirrorline.api.kafka.FetchedBatch` and
:class:`~mirrorline.api.records.SourceBatch`, whose ``data`` the contract describes in words.

The header (Kafka's RecordBatch, magic 2), big-endian::

    baseOffset int64 @0, batchLength int32 @8, partitionLeaderEpoch int32 @12, magic int8 @16,
    crc uint32 @17, attributes int16 @21, lastOffsetDelta int32 @23, baseTimestamp int64 @27,
    maxTimestamp int64 @35, producerId int64 @43, producerEpoch int16 @51, baseSequence int32 @53,
    recordsCount int32 @57

``batchLength`` counts the bytes after itself (a batch is ``LOG_OVERHEAD + batchLength`` bytes);
the CRC-32C (Castagnoli) covers ``attributes`` to the end. Attribute bits: 0-2 compression codec,
3 LogAppendTime, 4 transactional, 5 control, 6 delete horizon. Magic 0/1 message sets share the
first 17 bytes' layout (offset, size, crc, magic).
"""

from __future__ import annotations

import struct

import crc32c

#: offset + size: the bytes in front of every batch (v2) or message (v0/v1)
LOG_OVERHEAD = 12
#: v2 batch header size (Kafka's RECORD_BATCH_OVERHEAD)
HEADER_SIZE = 61
MAGIC_V2 = 2
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
PRODUCER_OFFSET = 43

CODEC_MASK = 0x07
LOG_APPEND_TIME = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
DELETE_HORIZON = 0x40

#: baseOffset, batchLength: in front of every entry, any magic
LOG_ENTRY = struct.Struct(">qi")
#: the whole v2 header in one unpack: baseOffset .. recordsCount, in the order of the module docstring
HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSETS = struct.Struct(">qii")         # baseOffset, batchLength, partitionLeaderEpoch
_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
_PRODUCER = struct.Struct(">qhi")        # producerId, producerEpoch, baseSequence


def read_header(batch) -> tuple:
    """The 13 header fields of the v2 batch at the start of ``batch`` (bytes, bytearray or memoryview)."""
    return HEADER.unpack_from(batch)


def crc_of(batch) -> int:
    """The CRC-32C of a v2 batch's bytes from ``attributes`` to the end (what its ``crc`` field must hold)."""
    return crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])


def crc_matches(batch, stored: int) -> bool:
    """Whether a v2 batch's bytes match the CRC its header stores."""
    return crc_of(batch) == stored


def codec_of(batch) -> int:
    """The compression codec (attribute bits 0-2) of a v2 batch."""
    return batch[ATTRIBUTES_OFFSET + 1] & CODEC_MASK


def write_crc(buffer: bytearray) -> None:
    """Recompute and store the CRC of a v2 batch after its other fields changed."""
    _CRC.pack_into(buffer, CRC_OFFSET, crc_of(buffer))


def write_base(buffer: bytearray, base_offset: int, partition_leader_epoch: int) -> None:
    """Set ``baseOffset`` and ``partitionLeaderEpoch`` (not covered by the CRC)."""
    length = _LENGTH.unpack_from(buffer, 8)[0]
    _OFFSETS.pack_into(buffer, 0, base_offset, length, partition_leader_epoch)


def write_length(buffer: bytearray) -> None:
    """Set ``batchLength`` from the buffer's size (not covered by the CRC)."""
    _LENGTH.pack_into(buffer, 8, len(buffer) - LOG_OVERHEAD)


def write_attributes(buffer: bytearray, attributes: int) -> None:
    """Set ``attributes``; call :func:`write_crc` afterwards."""
    _ATTRIBUTES.pack_into(buffer, ATTRIBUTES_OFFSET, attributes)


def write_producer_fields(buffer: bytearray, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
    """Set the producer fields (idempotence, transactions); call :func:`write_crc` afterwards."""
    _PRODUCER.pack_into(buffer, PRODUCER_OFFSET, producer_id, producer_epoch, base_sequence)
