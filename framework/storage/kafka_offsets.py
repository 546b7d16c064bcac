"""Source offsets in a compacted Kafka topic, in Kafka Connect's offsets-topic format.

Records (Connect's internal JsonConverter, ``schemas.enable=false``, compact JSON):
key ``[<connector>, <source partition>]``, value the source offset object, or null (a
tombstone: the partition is forgotten). The key is serialised in the dict order it was given,
never sorted, and non-ASCII characters are written as UTF-8 (as Jackson does): Java workers
look offsets up by the exact key bytes, so connectors that share an offsets topic with Java
Connect must hand over partitions in Java's order (MM2's connectors do). Records go to the
partition the default partitioner picks for the key bytes (murmur2), as Java's do.

Reads are by value: the in-memory map is keyed by :func:`~mirrorline.storage.offsets.partition_key`,
so a lookup finds a partition whatever its key order. ``get`` and ``all`` first read the topic
to its end (a task moving from another worker must see that worker's final commit), then
answer from memory. ``put`` writes the whole batch and waits for every acknowledgement, then
updates the map. Kafka gives no atomicity across records without transactions, so a failed
put may leave part of its batch written; each record is still a complete, valid offset for
its partition, which is what resumption needs (Connect has the same property).

The tail reads this worker's own writes back too. It does not decode them: a record ``put``
already applied is passed over by its position, and one the tail reaches while ``put`` still
waits for acknowledgements (most of a flush of thousands of partitions) is matched by its key and
value bytes to the objects ``put`` encoded. Only records written elsewhere, or bytes that differ,
are decoded.

Exactly-once source tasks (:mod:`mirrorline.runtime.exactly_once_task`) write the same records
with :func:`offset_key` / :func:`offset_value` through their own transactional producer, in the
transaction of the records they describe; the store then reads with ``read_committed``.

Topic settings (worker config): ``offset.storage.topic``, ``offset.storage.partitions``
(default 25), ``offset.storage.replication.factor`` (default 3, -1 for the broker default).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, NamedTuple

from mirrorline.api.kafka import ConsumerRecord

from mirrorline.storage.kafka_log import KafkaBasedLog, LogBackedStore, storage_settings
from mirrorline.storage.offsets import Offset, OffsetStore, Partition, partition_key

log = logging.getLogger(__name__)

DEFAULT_PARTITIONS = 25
DEFAULT_REPLICATION_FACTOR = 3


def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    """The record key Java Connect writes: ``["<connector>",{...}]``, keys in the given order."""
    return json.dumps([connector, dict(partition)], separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def offset_value(offset: Mapping[str, Any] | None) -> bytes | None:
    """The record value: the offset as compact JSON, or None (tombstone)."""
    if offset is None:
        return None
    if len(offset) == 1:
        position = offset.get("offset")
        if type(position) is int:  # MM2's {"offset": n}, written at every flush: what json.dumps gives, faster
            return b'{"offset":%d}' % position
    return json.dumps(dict(offset), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


#: value types a flat partition or offset map holds that a JSON round trip returns unchanged
_FLAT = frozenset({str, int, float, bool, type(None)})


def _copy(value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy that keeps key order (and fails early on values JSON cannot hold).

    Source partitions and offsets are nearly always flat maps of strings and numbers (MM2's
    ``{"cluster", "topic", "partition"}`` and ``{"offset"}``); those are copied as they are,
    which is what the JSON round trip would give. A flush at thousands of partitions spent most
    of its time in that round trip.
    """
    copied = dict(value)
    flat = _FLAT
    for key, item in copied.items():
        if type(key) is not str or type(item) not in flat:
            return json.loads(json.dumps(copied))
    return copied


#: (connector, partition) pairs whose two key encodings a store keeps (see KafkaOffsetStore._keys)
_KEY_CACHE_LIMIT = 100_000


def _cache_key(connector: str, partition: Mapping[str, Any]) -> tuple | None:
    """A dict key telling (connector, partition) apart exactly, key order included; None if the
    partition holds anything but strings and ints (1, 1.0 and True are equal as dict keys but
    not as JSON)."""
    items = tuple(partition.items())
    for key, value in items:
        if type(key) is not str or (type(value) is not str and type(value) is not int):
            return None
    return connector, items


class _Writing(NamedTuple):
    """One record a ``put`` is writing: its value bytes and the objects they encode."""

    value: bytes | None
    connector: str
    partition: Partition
    offset: Offset | None
    key: str


class KafkaOffsetStore(LogBackedStore, OffsetStore):
    """Offsets kept in a compacted topic and mirrored in memory (distributed mode)."""

    def __init__(self, topic: str, client_props: Mapping[str, Any], *, partitions: int = DEFAULT_PARTITIONS,
                 replication_factor: int = DEFAULT_REPLICATION_FACTOR, topic_config: Mapping[str, Any] | None = None,
                 read_committed: bool = False):
        # partition_key -> (connector, partition, offset); where the applied value was written
        self._data: dict[str, tuple[str, Partition, Offset]] = {}
        self._written_at: dict[str, tuple[int, int]] = {}
        #: positions ``put`` applied before the tail read them: the tail skips them undecoded
        self._put_ahead: set[tuple[int, int]] = set()
        #: record key bytes -> what ``put`` is writing under it, until the tail or ``put`` applies it
        self._in_flight: dict[bytes, _Writing] = {}
        #: (connector, partition items) -> (record key bytes, partition_key): a flush writes the same
        #: partitions every time, and each costs two JSON encodings otherwise
        self._key_cache: dict[tuple, tuple[bytes, str]] = {}
        self.log = KafkaBasedLog(topic, client_props, self._on_record, partitions=partitions,
                                 replication_factor=replication_factor, topic_config=topic_config,
                                 read_committed=read_committed)

    @classmethod
    def from_config(cls, worker_config: Mapping[str, Any], *, read_committed: bool = False) -> KafkaOffsetStore:
        """A store configured from worker settings (client settings come from the same map).

        ``read_committed``: exactly-once source tasks write offsets in transactions; the store
        then reads only committed ones (Connect forces isolation.level=read_committed too).
        """
        topic, partitions, replication_factor = storage_settings(worker_config, "offset.storage", DEFAULT_PARTITIONS,
                                                                 DEFAULT_REPLICATION_FACTOR)
        return cls(topic, worker_config, partitions=partitions, replication_factor=replication_factor,
                   read_committed=read_committed)

    async def get(self, connector, partitions):
        # Read to the end first, as Connect's offset reader does: a task taking over from another
        # worker must see that worker's last commit, which may still be on its way to this tail.
        await self.log.read_to_end()
        out = []
        for partition in partitions:
            entry = self._data.get(partition_key(connector, partition))
            out.append(None if entry is None else json.loads(json.dumps(entry[2])))
        return out

    async def put(self, connector, offsets):
        batch = [(_copy(partition), None if offset is None else _copy(offset)) for partition, offset in offsets]
        if not batch:
            return
        keys = [self._keys(connector, p) for p, _ in batch]
        records = [(record_key, offset_value(o)) for (record_key, _), (_, o) in zip(keys, batch)]
        in_flight = self._in_flight
        writing = [_Writing(value, connector, partition, offset, key)
                   for (_, value), (partition, offset), (_, key) in zip(records, batch, keys)]
        for (record_key, _), entry in zip(records, writing):
            in_flight[record_key] = entry
        try:
            written = await self.log.send_batch(records)
        finally:
            # whatever the tail has not matched yet is applied below (or, on failure, decoded
            # by the tail if it was written after all)
            for (record_key, _), entry in zip(records, writing):
                if in_flight.get(record_key) is entry:
                    del in_flight[record_key]
        for (partition, offset), (_, key), metadata in zip(batch, keys, written):
            at = (metadata.partition, metadata.offset)
            if self._apply(connector, partition, offset, at, key):
                self._put_ahead.add(at)

    def _keys(self, connector: str, partition: Partition) -> tuple[bytes, str]:
        """The record key (:func:`offset_key`) and the map key (``partition_key``) of a partition."""
        cache_key = _cache_key(connector, partition)
        if cache_key is None:
            return offset_key(connector, partition), partition_key(connector, partition)
        keys = self._key_cache.get(cache_key)
        if keys is None:
            if len(self._key_cache) >= _KEY_CACHE_LIMIT:
                self._key_cache.clear()
            keys = self._key_cache[cache_key] = (offset_key(connector, partition), partition_key(connector, partition))
        return keys

    async def all(self, connector):
        await self.log.read_to_end()
        return [(json.loads(json.dumps(p)), json.loads(json.dumps(o)))
                for c, p, o in self._data.values() if c == connector]

    def _on_record(self, record: ConsumerRecord) -> None:
        if self._put_ahead:
            at = (record.partition, record.offset)
            if at in self._put_ahead:  # our own write, applied by put: decoding it would change nothing
                self._put_ahead.discard(at)
                return
        if self._in_flight and record.key is not None:
            entry = self._in_flight.get(record.key)
            if entry is not None and entry.value == record.value:
                # the bytes a running put is writing: its objects are what decoding would give
                del self._in_flight[record.key]
                self._apply(entry.connector, entry.partition, entry.offset, (record.partition, record.offset),
                            entry.key)
                return
        try:
            key = json.loads(record.key) if record.key is not None else None
            value = json.loads(record.value) if record.value is not None else None
        except ValueError as exc:
            log.error("offsets topic %s: ignoring record at %d/%d that is not JSON: %s",
                      record.topic, record.partition, record.offset, exc)
            return
        if not (isinstance(key, list) and len(key) == 2 and isinstance(key[0], str) and isinstance(key[1], dict)):
            log.error("offsets topic %s: ignoring record at %d/%d: key is not [connector, partition]: %r",
                      record.topic, record.partition, record.offset, record.key)
            return
        if value is not None and not isinstance(value, dict):
            log.error("offsets topic %s: ignoring record at %d/%d: offset is not a JSON object: %r",
                      record.topic, record.partition, record.offset, record.value)
            return
        self._apply(key[0], key[1], value, (record.partition, record.offset))

    def _apply(self, connector: str, partition: Partition, offset: Offset | None, at: tuple[int, int],
               key: str | None = None) -> bool:
        """Apply a value written at (topic partition, offset), unless a later write of the key was applied.

        ``put`` and the tail both apply each record (whichever comes first); comparing positions
        keeps a slow ``put`` from overwriting a newer value the tail already read. Returns whether
        this call applied it. ``key`` is ``partition_key(connector, partition)`` when the caller has it.
        """
        if key is None:
            key = partition_key(connector, partition)
        previous = self._written_at.get(key)
        if previous is not None and previous[0] == at[0] and previous[1] >= at[1]:
            return False
        self._written_at[key] = at
        if offset is None:
            self._data.pop(key, None)
        else:
            self._data[key] = (connector, partition, offset)
        return True
