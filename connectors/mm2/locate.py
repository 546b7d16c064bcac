"""Finding a record's copy on another cluster, by content: exact offset translation without syncs.

Mirroring keeps each record's key, value, headers and timestamp, and a partition's order. So
the copy of a record on the other cluster is the first record there, at or after the earliest
offset whose timestamp is at least the record's (Kafka's ListOffsets by timestamp), that has
the same key, value, headers and timestamp. :func:`find_copy` scans from that offset.

This goes beyond MM2, whose translation (offset syncs, checkpoints) is sampled and makes a
consumer read again up to ``offset.lag.max`` records. It needs both clusters to be reachable,
and it cannot match copies whose timestamps the broker rewrote (topics with
``message.timestamp.type=LogAppendTime`` on the target).

:func:`translate_position` turns a consumer position on one cluster (the next offset it would
read) into the position on the other cluster that reads exactly the records it has not read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from mirrorline.api import Consumer, TopicPartition

from mirrorline.connectors.mirror_client.clients import assign_at

#: Records scanned at most when looking for one copy.
SCAN_LIMIT = 1_000_000
#: Seconds without any record before a scan gives up.
IDLE_TIMEOUT_S = 30.0


def same_record(a, b) -> bool:
    """True when two consumed records carry the same key, value, headers and timestamp."""
    return (a.key, a.value, list(a.headers or ()), a.timestamp) == (b.key, b.value, list(b.headers or ()), b.timestamp)


async def bounds(consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
    """The log start offset and end offset of ``tp``."""
    start = (await consumer.beginning_offsets([tp]))[tp]
    end = (await consumer.end_offsets([tp]))[tp]
    return start, end


async def scan(consumer: Consumer, tp: TopicPartition, begin: int, end: int,
               idle_timeout_s: float = IDLE_TIMEOUT_S) -> AsyncIterator:
    """Every record of ``tp`` from ``begin`` up to (not including) ``end``, in order.

    Raises TimeoutError when no record arrives for ``idle_timeout_s`` before ``end`` is reached
    (the cluster stopped answering), instead of waiting forever.
    """
    if begin >= end:
        return
    await assign_at(consumer, tp, begin)
    idle_since = asyncio.get_running_loop().time()
    while await consumer.position(tp) < end:
        batch = await consumer.getmany(tp, timeout_ms=1000)
        if batch:
            idle_since = asyncio.get_running_loop().time()
        elif asyncio.get_running_loop().time() - idle_since > idle_timeout_s:
            raise TimeoutError(f"no record of {tp.topic}-{tp.partition} arrived for {idle_timeout_s:.0f} s "
                               f"while reading offsets {begin}..{end}")
        for records in batch.values():
            for record in records:
                if begin <= record.offset < end:
                    yield record


async def record_at(consumer: Consumer, tp: TopicPartition, offset: int, end: int | None = None):
    """The first record of ``tp`` at or after ``offset`` (before ``end``), or None if there is none."""
    if end is None:
        end = (await consumer.end_offsets([tp]))[tp]
    async for record in scan(consumer, tp, offset, end):
        return record
    return None


async def last_record(consumer: Consumer, tp: TopicPartition):
    """The last data record of ``tp`` (None if it holds none); skips trailing control records."""
    _, end = await bounds(consumer, tp)
    return await last_before(consumer, tp, end)


async def find_copy(consumer: Consumer, tp: TopicPartition, record, *, from_offset: int | None = None,
                    limit: int = SCAN_LIMIT) -> int | None:
    """The offset on ``tp`` of the first copy of ``record`` (from another cluster), or None if absent.

    The scan starts at the earliest offset whose timestamp is at least the record's (or at
    ``from_offset`` when that is later) and reads at most ``limit`` records.
    """
    found = await consumer.offsets_for_times({tp: record.timestamp})
    hit = found.get(tp)
    if hit is None:
        return None
    start, end = await bounds(consumer, tp)
    begin = max(hit.offset, start, from_offset or 0)
    if begin >= end:
        return None
    scanned = 0
    async for candidate in scan(consumer, tp, begin, end):
        if same_record(candidate, record):
            return candidate.offset
        scanned += 1
        if scanned >= limit:
            break
    return None


@dataclass(frozen=True)
class Translation:
    """Where a position on one cluster lands on the other.

    ``position`` is the translated position (None: cannot be known exactly); ``missing`` counts
    records after the original position that the other cluster does not hold (not mirrored yet).
    """

    position: int | None
    missing: int = 0
    reason: str = ""


async def translate_position(source: Consumer, source_tp: TopicPartition, position: int,
                             target: Consumer, target_tp: TopicPartition) -> Translation:
    """The exact position on ``target_tp`` of a consumer at ``position`` on ``source_tp``.

    * The next unread source record has a copy on the target: the copy's offset.
    * The consumer has read everything on the source: just after the copy of the last source
      record (the target's end, if it holds no copy of any of them yet but also nothing else).
    * The next unread record is not on the target (not mirrored yet): just after the copy of
      the last record the consumer read, with ``missing`` = the source records not yet mirrored.
    """
    source_start, source_end = await bounds(source, source_tp)
    target_start, target_end = await bounds(target, target_tp)
    position = max(position, source_start)
    if position < source_end:
        wanted = await record_at(source, source_tp, position, source_end)
        if wanted is not None:
            copy = await find_copy(target, target_tp, wanted)
            if copy is not None:
                return Translation(copy)
    # everything read, or the next record is not mirrored yet: place it after the last one read
    missing = source_end - position
    if position <= source_start:
        if target_end == target_start:
            return Translation(target_start, missing)
        return Translation(None, missing, "no record before the position to anchor on")
    previous = await last_before(source, source_tp, position)
    if previous is None:
        return Translation(None, missing, "the records before the position are gone from the source")
    copy = await find_copy(target, target_tp, previous)
    if copy is None:
        return Translation(None, missing, f"the record at {previous.offset} is not on the target")
    return Translation(copy + 1, missing)


async def last_before(consumer: Consumer, tp: TopicPartition, position: int):
    """The last data record of ``tp`` before offset ``position`` (None if none is left)."""
    start, _ = await bounds(consumer, tp)
    window = 16  # grows when the tail holds only control records (transaction markers)
    while position > start:
        begin = max(start, position - window)
        found = None
        async for record in scan(consumer, tp, begin, position):
            found = record
        if found is not None or begin == start:
            return found
        window *= 16
    return None
