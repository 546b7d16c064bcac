"""Metadata v12 answers decoded by hand, for thousands of partitions at idle cost.

aiokafka decodes every response with its schema walker: one Python call per field, a tuple per
struct, and its admin client then turns the whole answer into dictionaries. At 8,000 partitions
one Metadata answer costs a few hundred milliseconds of CPU that way, and a mirror asks for one
every refresh (source topics, remote topics, topic IDs of each task's partitions). Measured on
the scale benchmark, that was a fifth of mirrorline's idle CPU.

:func:`decode` reads the same bytes with :mod:`struct` and a varint reader, in one pass, into
plain tuples laid out as aiokafka's schema decoder lays them out (so callers and tests can use
either); :class:`MetadataResponseV12` is a response type for aiokafka's connection whose
``decode`` is that function. The wire layout is Kafka's ``MetadataResponse.json`` at version 12
(flexible: compact strings and arrays, tagged fields, which are skipped).
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import NamedTuple

from mirrorline.clients.flexible_bytes import FlexibleReader

#: error_code, partition_index, leader_id, leader_epoch: the fixed head of a partition entry.
_PARTITION_HEAD = struct.Struct(">hiii")
_INT32_ARRAYS: dict[int, struct.Struct] = {}


class MetadataV12(NamedTuple):
    """A decoded Metadata v12 answer; ``brokers`` and ``topics`` are tuples as aiokafka lays them out.

    A broker is ``(node_id, host, port, rack, tags)``; a topic is ``(error_code, name, topic_id,
    is_internal, partitions, topic_authorized_operations, tags)``; a partition is ``(error_code,
    partition_index, leader_id, leader_epoch, replica_nodes, isr_nodes, offline_replicas, tags)``,
    its node lists as tuples. Tagged fields are skipped and shown as ``{}``.
    """

    throttle_time_ms: int
    brokers: list
    cluster_id: str | None
    controller_id: int
    topics: list
    tags: dict


def decode(data, pos: int = 0, details: bool = True) -> MetadataV12:
    """Decode a Metadata v12 response body (after the response header) starting at ``pos``.

    With ``details`` False each topic's partitions are stepped over and counted: the topic's
    ``partitions`` is then that count (an int), at a third of the cost.
    Raises ``ValueError`` when the bytes end early or an array's length is impossible.
    """
    if not isinstance(data, bytes):
        data, pos = bytes(data[pos:]), 0  # indexing bytes is faster than a memoryview
    reader = FlexibleReader(data, pos)
    try:
        return _decode(reader, _partitions if details else _count_partitions)
    except (IndexError, struct.error) as exc:
        raise ValueError(f"Metadata v12 answer ends early or is malformed at byte {reader.pos}: {exc}") from exc


def _decode(reader: FlexibleReader, read_partitions) -> MetadataV12:
    throttle = reader.int32()
    brokers = []
    for _ in range(max(reader.uvarint() - 1, 0)):
        node_id = reader.int32()
        host = reader.compact_string()
        port = reader.int32()
        rack = reader.compact_string()
        brokers.append((node_id, host, port, rack, reader.skip_tags()))
    cluster_id = reader.compact_string()
    controller_id = reader.int32()
    topics = []
    data = reader.data
    for _ in range(max(reader.uvarint() - 1, 0)):
        error_code = reader.int16()
        name = reader.compact_string()
        start = reader.pos
        topic_id = bytes(data[start:start + 16])
        if len(topic_id) != 16:
            raise ValueError(f"Metadata v12 answer ends inside the topic ID of {name!r}")
        is_internal = data[start + 16] != 0
        reader.pos = start + 17
        count = reader.uvarint() - 1
        partitions, reader.pos = read_partitions(data, reader.pos, max(count, 0))
        operations = reader.int32()
        topics.append((error_code, name, topic_id, is_internal, partitions, operations, reader.skip_tags()))
    tags = reader.skip_tags()
    return MetadataV12(throttle, brokers, cluster_id, controller_id, topics, tags)


def _length_at(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (a compact length: one byte, the usual case, read inline)
    and the position after it."""
    value = data[pos]
    if value & 0x80:
        reader = FlexibleReader(data, pos)
        value = reader.uvarint()
        return value, reader.pos
    return value, pos + 1


def _after_tags(data: bytes, pos: int) -> int:
    """The position after the tagged fields at ``pos`` (usually none: one zero byte)."""
    if data[pos] == 0:
        return pos + 1
    reader = FlexibleReader(data, pos)
    reader.skip_tags()
    return reader.pos


def _partitions(data: bytes, pos: int, count: int) -> tuple[list, int]:
    """``count`` partition entries from ``pos``: the loop that runs once per partition, so it is
    written flat."""
    head_at = _PARTITION_HEAD.unpack_from
    arrays = _INT32_ARRAYS
    partitions = []
    append = partitions.append
    for _ in range(count):
        head = head_at(data, pos)
        pos += 14
        lists = []
        for _array in range(3):  # replica_nodes, isr_nodes, offline_replicas
            length, pos = _length_at(data, pos)
            length -= 1
            if length < 0:
                lists.append(None)
                continue
            layout = arrays.get(length)
            if layout is None:
                layout = arrays.setdefault(length, struct.Struct(f">{length}i"))
            lists.append(layout.unpack_from(data, pos))
            pos += 4 * length
        pos = _after_tags(data, pos)
        append((*head, *lists, _NO_TAGS))
    return partitions, pos


def _count_partitions(data: bytes, pos: int, count: int) -> tuple[int, int]:
    """Step over ``count`` partition entries from ``pos``; returns ``(count, position after them)``."""
    for _ in range(count):
        pos += 14  # error_code, partition_index, leader_id, leader_epoch
        for _array in range(3):
            length, pos = _length_at(data, pos)
            if length > 1:
                pos += 4 * (length - 1)
        pos = _after_tags(data, pos)
    if pos > len(data):
        raise IndexError("partition entries run past the end")
    return count, pos


#: The tagged fields of an entry that has none (shared: nobody changes it).
_NO_TAGS: dict = {}


class _RecentAnswers:
    """The last few answers decoded, by their exact bytes: an idle mirror asks the same questions
    every refresh and the cluster gives the same answer, so each is decoded once. The bytes are
    the key, so a changed answer is always decoded anew."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._answers: dict[bytes, MetadataV12] = {}

    def decode(self, body: bytes, details: bool) -> MetadataV12:
        answer = self._answers.pop(body, None)
        if answer is None:
            answer = decode(body, 0, details)
            if len(self._answers) >= self.size:
                del self._answers[next(iter(self._answers))]  # the least recently used
        self._answers[body] = answer
        return answer


class MetadataResponseV12:
    """aiokafka response type for Metadata v12: ``decode`` reads the rest of the frame by hand.

    Answers byte-for-byte equal to a recent one are not decoded again: the same
    :class:`MetadataV12` is returned, so callers must never change what they are given.
    """

    API_KEY = 3
    API_VERSION = 12
    DETAILS = True
    #: a detailed answer holds a tuple per partition (MBs at thousands): only the last two are kept
    _recent = _RecentAnswers(2)

    @classmethod
    def decode(cls, data: BytesIO) -> MetadataV12:
        """Decode the remainder of ``data`` (aiokafka hands a BytesIO past the response header)."""
        return cls._recent.decode(data.read(), cls.DETAILS)


class MetadataCountsV12(MetadataResponseV12):
    """As :class:`MetadataResponseV12`, with each topic's partitions counted, not decoded."""

    DETAILS = False
    #: counted answers are small (a tuple per topic): enough for every question an idle mirror repeats
    _recent = _RecentAnswers(16)
