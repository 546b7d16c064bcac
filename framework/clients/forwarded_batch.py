"""ForwardedBatch: one already-encoded Kafka record batch, handed to aiokafka's producer as it is.

aiokafka's producer takes a batch builder through ``send_batch``; its sender asks the builder
for its records count, its size, and (with idempotence) to take the producer id, epoch and
base sequence it assigns, then for the bytes. :class:`ForwardedBatch` answers those calls for a
batch that is already encoded (magic 2): it writes the producer fields into the header and
recomputes the CRC-32C, leaving the records — and their compression — untouched. Written by a
transactional producer (exactly-once source tasks), the batch carries the transactional bit of
*that* producer instead of the source's; aiokafka's accumulator adds its partition to the
transaction (AddPartitionsToTxn) before the sender takes it, as for batches it builds itself.

The header layout (Kafka's RecordBatch): baseOffset int64 @0, batchLength int32 @8,
partitionLeaderEpoch int32 @12, magic int8 @16, crc uint32 @17, attributes int16 @21,
lastOffsetDelta int32 @23, baseTimestamp int64 @27, maxTimestamp int64 @35, producerId int64
@43, producerEpoch int16 @51, baseSequence int32 @53, recordsCount int32 @57; the CRC covers
attributes to the end.

(aiokafka's builder interface is internal, which is one reason aiokafka is pinned to a minor version.)
"""

from __future__ import annotations

import struct

import crc32c

from mirrorline.api.errors import ConnectError

HEADER_SIZE = 61
_MAGIC_V2 = 2
#: attributes bits the forwarded batch must not carry: transactional (0x10) and control (0x20)
_FOREIGN_ATTRIBUTES = 0x30
_TRANSACTIONAL = 0x10
_OFFSET = struct.Struct(">qii")          # baseOffset, batchLength, partitionLeaderEpoch
_ATTRIBUTES = struct.Struct(">hi")       # attributes, lastOffsetDelta
_PRODUCER = struct.Struct(">qhii")       # producerId, producerEpoch, baseSequence, recordsCount
_CRC = struct.Struct(">I")


class InvalidBatchError(ConnectError):
    """A task returned bytes that are not one magic-2 record batch as SourceBatch requires."""


class ForwardedBatch:
    """aiokafka batch-builder stand-in for one pre-encoded record batch (see the module docstring)."""

    def __init__(self, data: bytes, record_count: int, transactional: bool = False):
        buffer = bytearray(data)
        if len(buffer) < HEADER_SIZE or buffer[16] != _MAGIC_V2:
            raise InvalidBatchError(f"not a magic-2 record batch ({len(buffer)} bytes, magic "
                                    f"{buffer[16] if len(buffer) > 16 else None})")
        _, length, _ = _OFFSET.unpack_from(buffer, 0)
        attributes, last_delta = _ATTRIBUTES.unpack_from(buffer, 21)
        count = struct.unpack_from(">i", buffer, 57)[0]
        if length + 12 != len(buffer):
            raise InvalidBatchError(f"batch length {length} + 12 does not match the {len(buffer)} bytes given "
                                    f"(exactly one batch is required)")
        if count != record_count or count <= 0 or last_delta != count - 1:
            raise InvalidBatchError(f"records count {count} / last offset delta {last_delta} do not describe "
                                    f"{record_count} records with offset deltas 0..{record_count - 1}")
        if attributes & 0x08:
            raise InvalidBatchError("LogAppendTime batch: only CreateTime batches can be forwarded")
        _OFFSET.pack_into(buffer, 0, 0, length, -1)
        attributes &= ~_FOREIGN_ATTRIBUTES
        if transactional:  # written by a transactional producer: the broker requires the bit
            attributes |= _TRANSACTIONAL
        _ATTRIBUTES.pack_into(buffer, 21, attributes, last_delta)
        self._buffer = buffer
        self._count = record_count
        self._set_producer_state(-1, -1, -1)

    # -- the builder interface aiokafka's accumulator and sender use --------------------------
    def append(self, **_ignored):
        """Nothing can be added to an encoded batch: None, as a full builder answers."""
        return None

    def close(self) -> None:
        """Already closed: the batch is complete."""

    def closed(self) -> bool:
        """Always true, so the sender takes the batch at once (no linger)."""
        return True

    def size(self) -> int:
        """The batch's size in bytes."""
        return len(self._buffer)

    def record_count(self) -> int:
        """Records in the batch: the sender advances the idempotence sequence by this."""
        return self._count

    def _set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        _PRODUCER.pack_into(self._buffer, 43, producer_id, producer_epoch, base_sequence, self._count)
        _CRC.pack_into(self._buffer, 17, crc32c.crc32c(memoryview(self._buffer)[21:]))

    def _build(self) -> bytearray:
        return self._buffer
