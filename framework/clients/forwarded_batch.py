"""ForwardedBatch: one already-encoded Kafka record batch, written as it is.

An idempotent producer that is not transactional writes it with mirrorline's own loop
(:mod:`.batch_sender`), which asks it what aiokafka's sender asks (below). A transactional producer
hands it to aiokafka: aiokafka's producer takes a batch builder through ``send_batch``; its sender asks the builder
for its records count, its size, and (with idempotence) to take the producer id, epoch and
base sequence it assigns, then for the bytes. :class:`ForwardedBatch` answers those calls for a
batch that is already encoded (magic 2): it writes the producer fields into the header and
recomputes the CRC-32C (once, when the sender takes the bytes), leaving the records — and their
compression — untouched. Given a
``bytearray`` it writes into that buffer (no copy); given ``bytes`` it works on a copy. Written by a
transactional producer (exactly-once source tasks), the batch carries the transactional bit of
*that* producer instead of the source's; aiokafka's accumulator adds its partition to the
transaction (AddPartitionsToTxn) before the sender takes it, as for batches it builds itself.

The header is read and written with :mod:`.record_batch`, the one v2 codec.

(aiokafka's builder interface is internal, which is one reason aiokafka is pinned to a minor version.)
"""

from __future__ import annotations

from mirrorline.api.errors import ConnectError
from mirrorline.clients import record_batch as rb

#: attributes bits the forwarded batch must not carry: transactional and control
_FOREIGN_ATTRIBUTES = rb.TRANSACTIONAL | rb.CONTROL


class InvalidBatchError(ConnectError):
    """A task returned bytes that are not one magic-2 record batch as SourceBatch requires."""


class ForwardedBatch:
    """aiokafka batch-builder stand-in for one pre-encoded record batch (see the module docstring)."""

    def __init__(self, data: bytes | bytearray, record_count: int, transactional: bool = False):
        # a bytearray is taken over (SourceBatch says so): its header is rewritten in place, which
        # saves holding a second copy of every batch until the target acknowledges it
        buffer = data if type(data) is bytearray else bytearray(data)
        if len(buffer) < rb.HEADER_SIZE or buffer[rb.MAGIC_OFFSET] != rb.MAGIC_V2:
            raise InvalidBatchError(f"not a magic-2 record batch ({len(buffer)} bytes, magic "
                                    f"{buffer[rb.MAGIC_OFFSET] if len(buffer) > rb.MAGIC_OFFSET else None})")
        (_, length, _, _, _, attributes, last_delta, _, _, _, _, _, count) = rb.read_header(buffer)
        if length + rb.LOG_OVERHEAD != len(buffer):
            raise InvalidBatchError(f"batch length {length} + 12 does not match the {len(buffer)} bytes given "
                                    f"(exactly one batch is required)")
        if count != record_count or count <= 0 or last_delta != count - 1:
            raise InvalidBatchError(f"records count {count} / last offset delta {last_delta} do not describe "
                                    f"{record_count} records with offset deltas 0..{record_count - 1}")
        if attributes & rb.LOG_APPEND_TIME:
            raise InvalidBatchError("LogAppendTime batch: only CreateTime batches can be forwarded")
        rb.write_base(buffer, 0, -1)
        attributes &= ~_FOREIGN_ATTRIBUTES
        if transactional:  # written by a transactional producer: the broker requires the bit
            attributes |= rb.TRANSACTIONAL
        rb.write_attributes(buffer, attributes)
        self._buffer = buffer
        self._count = record_count
        #: whether the header changed since the CRC was last written: it is written once, when the
        #: sender asks for the bytes, instead of after each rewrite (an idempotent producer sets the
        #: producer fields a second time, after this batch was made)
        self._crc_stale = True
        rb.write_producer_fields(buffer, -1, -1, -1)

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
        rb.write_producer_fields(self._buffer, producer_id, producer_epoch, base_sequence)
        self._crc_stale = True

    def _build(self) -> bytearray:
        if self._crc_stale:
            rb.write_crc(self._buffer)
            self._crc_stale = False
        return self._buffer
