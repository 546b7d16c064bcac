"""MirrorClient: what applications and operators ask of a mirrored cluster (MM2's MirrorClient).

Built from a cluster's client settings (``bootstrap.servers``, security settings, and the
``replication.policy.*`` the mirror uses). It answers, from that one cluster:

- ``heartbeat_topics()`` / ``checkpoint_topics()`` / ``remote_topics(source=None)``;
- ``upstream_clusters()``: every alias data reaches this cluster from, via heartbeats;
- ``replication_hops(alias)``: how many hops away ``alias`` is (-1 if unreachable);
- ``remote_consumer_offsets(group, remote_alias)`` (= ``translate_offsets``): the group's
  positions translated for this cluster, from ``<remote_alias>.checkpoints.internal``.

``reread_count`` goes beyond MM2: given access to both clusters, it finds exactly how many
records a consumer starting at a translated offset would read again, by locating the next
unconsumed source record among the target's records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mirrorline.api import Admin, Consumer, KafkaClients, OffsetAndMetadata, TopicPartition

from .clients import assign_at, read_to_end
from .config import load_replication_policy
from .formats import Checkpoint, SchemaError


class MirrorClient:
    """Reads mirror metadata (heartbeats, checkpoints, remote topics) from one cluster.

    ``clients`` makes the Kafka clients: a context's or launcher's ``clients``, or, in an
    application, ``mirrorline.clients.runtime_clients.KAFKA_CLIENTS``.
    """

    def __init__(self, config: Mapping[str, Any], clients: KafkaClients):
        self.config = {k: str(v) for k, v in config.items()}
        self.clients = clients
        self.policy = load_replication_policy(self.config)
        self._admin: Admin | None = None

    def _props(self) -> dict[str, Any]:
        return {k: v for k, v in self.config.items() if not k.startswith("replication.policy")}

    async def __aenter__(self) -> MirrorClient:
        self._admin = self.clients.admin(self._props())
        await self._admin.start()
        return self

    async def __aexit__(self, *exc) -> None:
        if self._admin is not None:
            await self._admin.close()

    @property
    def admin(self) -> Admin:
        """The started admin client (use the client as ``async with``)."""
        assert self._admin is not None, "use MirrorClient as 'async with MirrorClient(config, clients) as client'"
        return self._admin

    async def topics(self) -> list[str]:
        """Every topic on the cluster."""
        return sorted(await self.admin.list_topics())

    async def heartbeat_topics(self) -> list[str]:
        """Heartbeat topics (``heartbeats``, ``A.heartbeats``, ``B.A.heartbeats`` ...)."""
        return [t for t in await self.topics() if self.policy.is_heartbeats_topic(t)]

    async def checkpoint_topics(self) -> list[str]:
        """Checkpoint topics (``A.checkpoints.internal`` ...)."""
        return [t for t in await self.topics() if self.policy.is_checkpoints_topic(t)]

    async def remote_topics(self, source: str | None = None) -> list[str]:
        """Non-internal topics replicated from another cluster (from ``source`` only, if given)."""
        out = []
        for topic in await self.topics():
            origin = self.policy.topic_source(topic)
            if origin and not self.policy.is_internal_topic(topic) and (source is None or origin == source):
                out.append(topic)
        return out

    async def upstream_clusters(self) -> set[str]:
        """Every cluster alias found along the heartbeat topics' replication chains."""
        aliases: set[str] = set()
        for topic in await self.heartbeat_topics():
            seen: set[str] = set()
            current: str | None = topic
            while current and (alias := self.policy.topic_source(current)) and alias not in seen:
                seen.add(alias)
                upstream = self.policy.upstream_topic(current)
                current = None if upstream == current else upstream
            aliases |= seen
        return aliases

    async def replication_hops(self, alias: str) -> int:
        """Fewest hops from ``alias`` to this cluster according to the heartbeat topics; -1 if none."""
        best = -1
        for topic in await self.heartbeat_topics():
            hops, current, seen = 1, topic, set()
            while current:
                source = self.policy.topic_source(current)
                if source is None or source in seen:
                    break
                if source == alias:
                    best = hops if best == -1 else min(best, hops)
                    break
                seen.add(source)
                upstream = self.policy.upstream_topic(current)
                current = None if upstream == current else upstream
                hops += 1
        return best

    async def checkpoints(self, group: str, remote_alias: str, timeout_s: float = 60.0) -> dict[TopicPartition, Checkpoint]:
        """The last checkpoint of ``group`` per partition on this cluster, from ``<remote_alias>.checkpoints.internal``."""
        topic = self.policy.checkpoints_topic(remote_alias)
        latest: dict[TopicPartition, Checkpoint] = {}

        def keep(record) -> None:
            try:
                checkpoint = Checkpoint.decode(record.key, record.value)
            except (SchemaError, TypeError, ValueError):
                return
            if checkpoint.group == group:
                latest[TopicPartition(checkpoint.topic, checkpoint.partition)] = checkpoint

        if topic not in await self.topics():
            return {}
        consumer = self.clients.consumer(self._props())
        await consumer.start()
        try:
            await read_to_end(consumer, TopicPartition(topic, 0), keep, timeout_s)
        finally:
            await consumer.stop()
        return dict(sorted(latest.items()))

    async def remote_consumer_offsets(self, group: str, remote_alias: str,
                                      timeout_s: float = 60.0) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's positions on this cluster, translated from ``remote_alias`` (MM2's translateOffsets)."""
        return {tp: OffsetAndMetadata(c.downstream_offset, c.metadata)
                for tp, c in (await self.checkpoints(group, remote_alias, timeout_s)).items()}

    translate_offsets = remote_consumer_offsets


async def reread_count(source_consumer: Consumer, source_tp: TopicPartition, source_position: int,
                       target_consumer: Consumer, target_tp: TopicPartition, target_position: int,
                       limit: int = 100_000) -> int | None:
    """Exactly how many records a consumer at ``target_position`` would read that it already read upstream.

    Finds the next unconsumed source record (at ``source_position``) among the target's records
    from ``target_position`` on, comparing key, value, headers and timestamp. If the group has
    consumed everything on the source, every target record after ``target_position`` is a re-read.
    Returns None when the record is not found within ``limit`` records (not mirrored yet).
    """
    source_end = (await source_consumer.end_offsets([source_tp]))[source_tp]
    target_end = (await target_consumer.end_offsets([target_tp]))[target_tp]
    if source_position >= source_end:
        return max(0, target_end - target_position)
    wanted = await _record_at(source_consumer, source_tp, source_position)
    if wanted is None:
        return None
    await assign_at(target_consumer, target_tp, target_position)
    scanned = 0
    while scanned < limit and await target_consumer.position(target_tp) < target_end:
        for records in (await target_consumer.getmany(target_tp, timeout_ms=1000)).values():
            for record in records:
                if _same(record, wanted):
                    return record.offset - target_position
                scanned += 1
    return None


async def _record_at(consumer: Consumer, tp: TopicPartition, offset: int):
    await assign_at(consumer, tp, offset)
    for _ in range(10):
        for records in (await consumer.getmany(tp, timeout_ms=1000)).values():
            for record in records:
                if record.offset >= offset:
                    return record
    return None


def _same(a, b) -> bool:
    return (a.key, a.value, list(a.headers), a.timestamp) == (b.key, b.value, list(b.headers), b.timestamp)
