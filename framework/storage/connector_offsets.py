"""A source connector's own offsets topic (``offsets.storage.topic``), read before the worker's.

Kafka Connect lets a source connector keep its offsets in a topic of its own, on the cluster its
producer writes to (KIP-618). Its tasks then write there (inside their transactions under
exactly-once), and read there first, falling back to the worker's global offsets topic for a
partition the connector's topic does not know yet, so a connector moved to its own topic resumes
where it was (Connect's ``ConnectorOffsetBackingStore``). :class:`ConnectorOffsetStore` is that
pair; the distributed herder makes one per connector topic.
"""

from __future__ import annotations

from mirrorline.storage.kafka_offsets import KafkaOffsetStore
from mirrorline.storage.offsets import OffsetStore, partition_key


class ConnectorOffsetStore(OffsetStore):
    """Writes to ``primary`` (the connector's topic); reads it first, then ``fallback`` (the worker's)."""

    def __init__(self, primary: KafkaOffsetStore, fallback: OffsetStore):
        self.primary = primary
        self.fallback = fallback

    @property
    def topic(self) -> str:
        """The connector's offsets topic: where its tasks write."""
        return self.primary.topic

    async def get(self, connector, partitions):
        partitions = list(partitions)
        found = await self.primary.get(connector, partitions)
        missing = [i for i, offset in enumerate(found) if offset is None]
        if missing:
            older = await self.fallback.get(connector, [partitions[i] for i in missing])
            for i, offset in zip(missing, older):
                found[i] = offset
        return found

    async def put(self, connector, offsets):
        """Write to the connector's topic; a removal (None) is written to the worker's topic too, or the
        partition would come back from there (as Connect resets both)."""
        offsets = list(offsets)
        await self.primary.put(connector, offsets)
        removed = [(p, None) for p, o in offsets if o is None]
        if removed:
            await self.fallback.put(connector, removed)

    async def all(self, connector):
        merged = {partition_key(connector, p): (p, o) for p, o in await self.fallback.all(connector)}
        merged.update({partition_key(connector, p): (p, o) for p, o in await self.primary.all(connector)})
        return list(merged.values())
