"""Fetched record batches made safe to forward: one partition's fetched bytes in, :class:`FetchedBatch` es out.

:func:`split_fetched` walks the raw ``records`` of one partition of a FetchResponse batch by batch, and
returns what a Java consumer with ``isolation.level=read_committed`` would return, record for record,
as magic-2 record batches the runtime can produce whole to the target:

- Control batches are never forwarded; with ``read_committed``, aborted transactional batches are
  skipped exactly as the Java consumer skips them (the aborted list is consumed up to each batch's last
  offset, an ABORT marker takes its producer out of the aborted set). Committed transactional batches are
  forwarded; the runtime clears the transactional bit.
- A batch that a broker would store unchanged apart from the producer fields (magic 2, CreateTime, no
  delete horizon, offset deltas exactly ``0..count-1``, starting at or after the fetch position) is
  forwarded as the source bytes: its header is read, its records are not (``reencoded=False``).
- Anything else is decoded with aiokafka and rebuilt as one magic-2 CreateTime batch with the same
  compression codec and offset deltas ``0..n-1``: compacted batches with gaps (``source_offsets`` then
  lists the real offsets), LogAppendTime batches (each record gets the time a consumer sees, the batch's
  max timestamp), batches carrying a delete horizon (the records' own timestamps), a first batch that
  starts before the fetch offset (earlier records dropped), and legacy magic 0/1 message sets.

The runtime recomputes the CRC of what it forwards, so every batch's CRC is checked here first
(``check_crcs``): a corrupt batch must fail, not be laundered into a valid one.

Headers are read and written with :mod:`.record_batch` (the one v2 codec); records, when a batch
must be rebuilt, are decoded and encoded with aiokafka's record codec. Every batch's ``data`` is a
``bytearray`` of its own, which the producer takes over (:class:`~.forwarded_batch.ForwardedBatch`):
one copy of a forwarded batch is held until the target acknowledges it, not two.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aiokafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from aiokafka.record.control_record import ABORT_MARKER, ControlRecord
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatch

from mirrorline.api.errors import CorruptRecordError
from mirrorline.api.kafka import FetchedBatch
from mirrorline.clients.record_batch import (CODEC_MASK, CONTROL, DELETE_HORIZON, HEADER,
                                             HEADER_SIZE, LOG_APPEND_TIME, LOG_ENTRY, LOG_OVERHEAD, MAGIC_OFFSET,
                                             TRANSACTIONAL, codec_of, crc_matches, write_attributes, write_crc,
                                             write_length)

__all__ = ["FetchedBatch", "SplitResult", "coalesce", "split_fetched"]

#: the smallest legal size field (Kafka's LegacyRecord.RECORD_OVERHEAD_V0)
_MIN_SIZE = 14
#: magic 0/1: offset int64, size int32, crc uint32, magic int8, attributes int8
_LEGACY_ATTRIBUTES_OFFSET = 17
#: attributes that rule out a header-only forward
_NEEDS_REBUILD = LOG_APPEND_TIME | DELETE_HORIZON

_ENCODERS = {1: gzip_encode, 2: snappy_encode, 3: lz4_encode, 4: zstd_encode}
#: no size limit for a rebuilt batch: it holds at most what one source batch held
_UNLIMITED = 2 ** 62


@dataclass(slots=True)
class SplitResult:
    """What :func:`split_fetched` made of one partition's fetched bytes.

    ``next_offset`` is the fetch position after everything consumed, skipped control and aborted batches
    included; ``skipped_records`` counts the records of control and aborted batches; ``too_large`` says
    the data was non-empty but held no complete batch (the fetch size is smaller than a batch).
    """

    batches: list[FetchedBatch]
    next_offset: int
    skipped_records: int
    too_large: bool


def split_fetched(raw: bytes, fetch_offset: int, aborted_transactions: Sequence[tuple[int, int]] | None, *,
                  read_committed: bool = True, check_crcs: bool = True) -> SplitResult:
    """Turn one partition's fetched record bytes into batches to forward (see the module docstring).

    :param raw: the partition's ``records`` from a FetchResponse, possibly ending in a partial batch
        (which is left for the next fetch).
    :param fetch_offset: the offset the fetch asked for; records before it are not returned.
    :param aborted_transactions: the response's ``(producer_id, first_offset)`` list (None or empty if
        there is none); only used with ``read_committed``.
    :param read_committed: skip aborted transactional batches, as ``isolation.level=read_committed``.
    :param check_crcs: verify each batch's CRC (CRC-32C for magic 2, CRC-32 for magic 0/1).
    :raises CorruptRecordError: a batch's CRC or size is wrong; the message names its offsets.
    """
    aborted = deque(sorted(aborted_transactions or (), key=lambda pair: pair[1])) if read_committed else deque()
    aborted_producers: set[int] = set()
    batches: list[FetchedBatch] = []
    position = fetch_offset
    skipped = 0
    complete = 0
    view = memoryview(raw)
    size = len(raw)
    pos = 0
    while size - pos >= LOG_OVERHEAD:
        base_offset, length = LOG_ENTRY.unpack_from(raw, pos)
        if length < _MIN_SIZE:
            raise CorruptRecordError(f"record batch at offset {base_offset}: size {length} is smaller than "
                                         f"the minimum record overhead ({_MIN_SIZE})")
        end = pos + LOG_OVERHEAD + length
        if end > size:
            break                                   # a partial batch: fetch truncation
        complete += 1
        entry = view[pos:end]
        pos = end
        magic = entry[MAGIC_OFFSET]
        if magic < 2:
            forwardable, position = _legacy_entry(entry, magic, base_offset, position, check_crcs)
            if forwardable is not None:
                batches.append(forwardable)
            continue
        if magic > 2:
            raise CorruptRecordError(f"record batch at offset {base_offset}: unknown magic {magic}")
        if len(entry) < HEADER_SIZE:
            raise CorruptRecordError(f"record batch at offset {base_offset}: size {len(entry)} is "
                                         f"smaller than the batch header ({HEADER_SIZE})")
        (_, _, _, _, crc, attributes, last_delta, _, max_timestamp,
         producer_id, _, _, count) = HEADER.unpack_from(entry)
        next_offset = base_offset + last_delta + 1
        if check_crcs and not crc_matches(entry, crc):
            raise CorruptRecordError(f"record batch at offsets {base_offset}..{next_offset - 1} is corrupt "
                                         f"(CRC-32C mismatch, stored {crc:#010x})")
        skip = bool(attributes & CONTROL)                  # never forwarded, whatever the isolation level
        if read_committed and producer_id >= 0:             # as the Java consumer's CompletedFetch
            while aborted and aborted[0][1] <= next_offset - 1:
                aborted_producers.add(aborted.popleft()[0])
            if skip:
                if _is_abort_marker(entry, base_offset):
                    aborted_producers.discard(producer_id)
            elif attributes & TRANSACTIONAL and producer_id in aborted_producers:
                skip = True
        if skip:
            skipped += count
        elif count > 0 and last_delta == count - 1 and not attributes & _NEEDS_REBUILD and base_offset >= position:
            # a bytearray: the producer rewrites its header in place instead of copying it again
            batches.append(FetchedBatch(bytearray(entry), range(base_offset, next_offset), count, max_timestamp,
                                        False))
        else:
            forwardable = _rebuild(DefaultRecordBatch(entry), attributes & CODEC_MASK, position)
            if forwardable is not None:
                batches.append(forwardable)
        position = next_offset
    return SplitResult(batches, position, skipped, size > 0 and complete == 0)


def _is_abort_marker(batch_bytes: memoryview, base_offset: int) -> bool:
    """Whether a control batch holds an ABORT marker (its first record's key says so)."""
    record = next(iter(DefaultRecordBatch(batch_bytes)), None)
    if record is None:
        raise CorruptRecordError(f"control batch at offset {base_offset} holds no record")
    return ControlRecord.parse(record.key) == ABORT_MARKER


def _legacy_entry(entry: memoryview, magic: int, offset: int, position: int,
                  check_crcs: bool) -> tuple[FetchedBatch | None, int]:
    """Convert one magic 0/1 message (a wrapper holds a compressed message set) to v2; returns (batch, position)."""
    batch = LegacyRecordBatch(entry, magic)
    if check_crcs and not batch.validate_crc():
        raise CorruptRecordError(f"message at offset {offset} (magic {magic}) is corrupt (CRC-32 mismatch)")
    codec = entry[_LEGACY_ATTRIBUTES_OFFSET] & CODEC_MASK
    forwardable = _rebuild(batch, codec, position)
    return forwardable, batch.next_offset


def _rebuild(records: Iterable, codec: int, position: int) -> FetchedBatch | None:
    """Re-encode the records at or after ``position`` as one v2 CreateTime batch with ``codec``.

    Keys, values and headers are copied as decoded; each record keeps the timestamp a consumer sees
    (LogAppendTime batches: the log-append time; magic 0: -1). Offset deltas become ``0..n-1``.
    Returns None when no record is left.
    """
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, _UNLIMITED)
    offsets: list[int] = []
    max_timestamp = -1
    for record in records:
        offset = record.offset
        if offset < position:
            continue
        timestamp = record.timestamp
        if timestamp is None:
            timestamp = -1
        builder.append(len(offsets), timestamp, record.key, record.value, record.headers)
        offsets.append(offset)
        position = offset + 1
        if timestamp > max_timestamp:
            max_timestamp = timestamp
    if not offsets:
        return None
    data = builder.build()
    if codec:
        data = _compress(data, codec)
    count = len(offsets)
    contiguous = offsets[-1] - offsets[0] == count - 1
    source_offsets = range(offsets[0], offsets[-1] + 1) if contiguous else offsets
    return FetchedBatch(data, source_offsets, count, max_timestamp, True)


def _compress(batch: bytearray, codec: int) -> bytearray:
    """Compress an uncompressed v2 batch's records with ``codec`` (always, even if it does not pay), fixing
    its length, attributes and CRC; aiokafka's builder would fall back to no compression."""
    encode = _ENCODERS.get(codec)
    if encode is None:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    out = batch[:HEADER_SIZE]
    out += encode(bytes(batch[HEADER_SIZE:]))
    write_length(out)
    attributes = HEADER.unpack_from(out)[5]
    write_attributes(out, (attributes & ~CODEC_MASK) | codec)
    write_crc(out)
    return out


def coalesce(batches: Sequence[FetchedBatch], limit: int) -> list[FetchedBatch]:
    """Merge runs of consecutive small batches of one partition into batches of up to ``limit`` bytes.

    Producers that send each record at once (``linger.ms=0``) write batches of one or a few
    records, and the target takes one batch per partition per produce request, so forwarding them
    one by one costs a request per record. Batches smaller than ``limit`` are therefore merged
    with their neighbours: decoded and re-encoded by aiokafka's native codec (about a microsecond
    per record), in order, with the records' own timestamps, keys, values and headers, and the
    compression codec they share (a run breaks where the codec changes). Larger batches are
    kept as they are. ``limit <= 0`` returns the batches unchanged.
    """
    if limit <= 0 or len(batches) < 2:
        return list(batches)
    out: list[FetchedBatch] = []
    run: list[FetchedBatch] = []
    run_size = 0
    run_codec = -1

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            out.append(_merge(run, run_codec))
        run.clear()

    for batch in batches:
        size = len(batch.data)
        codec = codec_of(batch.data)
        if size >= limit:
            flush()
            run_size = 0
            out.append(batch)
            continue
        if run and (codec != run_codec or run_size + size > limit):
            flush()
            run_size = 0
        run.append(batch)
        run_size += size
        run_codec = codec
    flush()
    return out


def _merge(run: Sequence[FetchedBatch], codec: int) -> FetchedBatch:
    """One batch holding every record of ``run`` in order (see :func:`coalesce`)."""
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, _UNLIMITED)
    offsets: list[int] = []
    max_timestamp = -1
    delta = 0
    for batch in run:
        for record, offset in zip(DefaultRecordBatch(batch.data), batch.source_offsets):
            builder.append(delta, record.timestamp, record.key, record.value, record.headers)
            delta += 1
            offsets.append(offset)
        if batch.max_timestamp > max_timestamp:
            max_timestamp = batch.max_timestamp
    data = builder.build()
    if codec:
        data = _compress(data, codec)
    contiguous = offsets[-1] - offsets[0] == len(offsets) - 1
    return FetchedBatch(data, range(offsets[0], offsets[-1] + 1) if contiguous else offsets,
                        len(offsets), max_timestamp, True)
