"""Reading and writing the offset maps of :mod:`.offset_map` in their compacted topic on the target.

The topic (``mirrorline-offset-map.<source>.internal``, one partition, ``cleanup.policy=compact``)
is created on first write. Reading never creates it: a missing topic means no map.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from collections.abc import Mapping
from typing import Any

from mirrorline.api import Admin, ConnectError, Consumer, KafkaClients, NewTopic, TopicAlreadyExistsError, TopicPartition

from mirrorline.connectors.mirror_client.clients import read_to_end
from .offset_map import MapReader, PartitionMap, encode, header_key, offset_map_topic, stale_chunk_keys

#: Seconds a read of the map topic may take.
READ_TIMEOUT_S = 60.0


async def _exists(admin: Admin, topic: str) -> bool:
    return topic in set(await admin.list_topics())


async def read_maps(admin: Admin, consumer: Consumer,
                    source_alias: str) -> dict[tuple[str, int], PartitionMap]:
    """Every complete map of flow ``source_alias->target`` stored on the target, by (source topic, partition).

    ``admin`` and ``consumer`` are started clients of the target; the consumer is re-assigned.
    """
    topic = offset_map_topic(source_alias)
    if not await _exists(admin, topic):
        return {}
    reader = MapReader()
    await read_to_end(consumer, TopicPartition(topic, 0), lambda r: reader.add(r.key, r.value), READ_TIMEOUT_S)
    return {(m.source_topic, m.partition): m for m in reader.maps()}


async def _headers(consumer: Consumer, topic: str) -> dict[bytes, bytes | None]:
    headers: dict[bytes, bytes | None] = {}

    def keep(record) -> None:
        if record.key is not None and b'"kind":"map"' in record.key:
            headers[record.key] = record.value

    await read_to_end(consumer, TopicPartition(topic, 0), keep, READ_TIMEOUT_S)
    return headers


async def _create(admin: Admin, topic: str, replication_factor: int) -> None:
    response = await admin.create_topics([NewTopic(topic, 1, replication_factor, {"cleanup.policy": "compact"})])
    for _topic, error in response.items():
        if error is not None and not isinstance(error, TopicAlreadyExistsError):
            raise ConnectError(f"cannot create topic {topic} on the target cluster: {error}")


async def write_maps(admin: Admin, consumer: Consumer, clients: KafkaClients, producer_props: Mapping[str, Any],
                     source_alias: str, maps: Iterable[PartitionMap], replication_factor: int) -> str:
    """Store ``maps`` on the target (replacing earlier maps of the same partitions); returns the topic.

    Creates the topic when missing. For each partition its chunks go first, then its header,
    then tombstones for the chunks of the map it replaces; all acknowledged by every in-sync
    replica on return.
    """
    topic = offset_map_topic(source_alias)
    if not await _exists(admin, topic):
        await _create(admin, topic, replication_factor)
        previous: dict[bytes, bytes | None] = {}
    else:
        previous = await _headers(consumer, topic)
    producer = clients.producer({**producer_props, "acks": "all", "max.request.size": 2 * 1024 * 1024})
    await producer.start()
    try:
        sent = []
        for pmap in maps:
            records = encode(pmap)
            stale = stale_chunk_keys(previous.get(header_key(pmap.source_topic, pmap.partition)),
                                     pmap.source_topic, pmap.partition)
            records += [(key, None) for key in stale if key not in {k for k, _ in records}]
            for key, value in records:
                sent.append(await producer.send(topic, key=key, value=value, partition=0))
        await asyncio.gather(*sent)  # raises the first failed delivery
    finally:
        await producer.stop()
    return topic
