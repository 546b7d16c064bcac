"""The contract's :class:`~mirrorline.api.clients.Admin` over aiokafka's admin client and our own requests.

What aiokafka's ``AIOKafkaAdminClient`` offers is called and its answers turned into the
contract's types (:mod:`mirrorline.api.kafka`); what it lacks (IncrementalAlterConfigs,
CreateTopics v4, admin offset commits and deletes, group states, ACLs, producer fencing) comes
from :mod:`.kafka_admin`. Every aiokafka error is translated (:mod:`.errors`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewPartitions
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import IncompatibleBrokerVersion

from mirrorline.api.clients import AclBinding, AclFilter, Admin
from mirrorline.api.errors import KafkaError
from mirrorline.api.kafka import (BrokerInfo, ClusterDescription, ConfigEntry, GroupListing, NewTopic,
                                  OffsetAndMetadata, PartitionInfo, TopicDescription, TopicPartition)
from mirrorline.clients import group_offsets, kafka_admin, metadata_reuse
from mirrorline.clients.consumer import AIO_ERRORS, aio
from mirrorline.clients.errors import error_for_code, translate
from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.clients.topic_ids import PartitionCountsRequest, TopicIdsRequest


class KafkaAdmin(Admin):
    """An admin client of one cluster; build it with :meth:`from_settings`."""

    #: whether start() was called and stop() not yet (the runtime closes a task's clients left open)
    is_open = False

    def __init__(self, kwargs: dict[str, Any], ignored: list[str] | None = None):
        self.ignored_settings = list(ignored or [])
        self.principal = kwargs.get("sasl_plain_username")
        self._admin = AIOKafkaAdminClient(**kwargs)
        # Its refreshes need brokers and the controller, not every topic (it asks for topics itself).
        metadata_reuse.ask_for_no_topics_when_empty(self._admin._client)
        # Topics are described with Metadata v12, read by a hand decoder (:mod:`.metadata_v12`): at
        # thousands of partitions aiokafka's own request and decoding cost most of an idle refresh.
        self._metadata_v12 = True
        #: group -> node id of its coordinator, as last found (a checkpoint cycle asks every group again)
        self._coordinators: dict[str, int] = {}
        #: many groups' offsets per request (FindCoordinator v4, OffsetFetch v8), until a broker refuses
        self._batched_group_offsets = True

    @classmethod
    def from_settings(cls, props: Mapping[str, Any]) -> KafkaAdmin:
        """An admin client from Java-style settings."""
        return cls(*client_kwargs(props, "admin"))

    async def _call(self, coro):
        try:
            return await coro
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    async def start(self) -> None:
        self.is_open = True
        await self._call(self._admin.start())

    async def stop(self) -> None:
        self.is_open = False
        await self._call(self._admin.close())

    # -- topics ----------------------------------------------------------------------------------
    async def list_topics(self) -> list[str]:
        return list(await self._call(self._admin.list_topics()))

    async def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicDescription]:
        wanted = None if topics is None else list(topics)
        if wanted == []:
            return []
        answer = await self._metadata_v12_answer(TopicIdsRequest(wanted))
        if answer is not None:
            return [_description_v12(entry) for entry in answer.topics]
        return [_description(entry) for entry in await self._call(self._admin.describe_topics(wanted))]

    async def partition_counts(self, topics: Iterable[str] | None = None) -> dict[str, int]:
        wanted = None if topics is None else list(topics)
        if wanted == []:
            return {}
        answer = await self._metadata_v12_answer(PartitionCountsRequest(wanted))
        if answer is not None:
            return {entry[1]: entry[4] for entry in answer.topics if entry[0] == 0}
        return await super().partition_counts(wanted)

    async def _metadata_v12_answer(self, request):
        """The broker's answer to a Metadata v12 ``request``; None (from then on) when the broker is
        older than Kafka 3.1 and the caller should use aiokafka's own request."""
        if not self._metadata_v12:
            return None
        try:
            return await self._admin._send_request(request)
        except (NotImplementedError, IncompatibleBrokerVersion):
            self._metadata_v12 = False
            return None
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    async def create_topics(self, topics: Iterable[NewTopic], timeout_ms: int = 30_000) -> dict[str, KafkaError | None]:
        answer = await self._call(kafka_admin.create_topics(
            self._admin, [(t.name, t.num_partitions, t.replication_factor, dict(t.configs)) for t in topics],
            timeout_ms))
        return {name: None if code == 0 else error_for_code(code, message or f"creating topic {name!r}")
                for name, (code, message) in answer.items()}

    async def create_partitions(self, new_totals: Mapping[str, int]) -> None:
        await self._call(self._admin.create_partitions(
            {topic: NewPartitions(total_count=int(total)) for topic, total in new_totals.items()}))

    async def describe_topic_configs(self, topics: Iterable[str]) -> dict[str, list[ConfigEntry]]:
        names = list(topics)
        if not names:
            return {}
        responses = await self._call(self._admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t) for t in names]))
        out: dict[str, list[ConfigEntry]] = {}
        for response in responses:
            for error_code, _message, _type, name, entries in response.resources:
                if error_code == 0:
                    out[name] = [ConfigEntry(entry[0], entry[1], bool(entry[2]), int(entry[3]), bool(entry[4]))
                                 for entry in entries]
        return out

    async def incremental_alter_configs(self, topic: str, set_configs: Mapping[str, str],
                                        delete_configs: Iterable[str] = ()) -> None:
        await self._call(kafka_admin.incremental_alter_configs(self._admin, topic, set_configs, delete_configs))

    # -- cluster -----------------------------------------------------------------------------------
    async def describe_cluster(self) -> ClusterDescription:
        found = await self._call(self._admin.describe_cluster())
        brokers = tuple(BrokerInfo(b["node_id"], b["host"], b["port"], b.get("rack"))
                        for b in found.get("brokers") or ())
        return ClusterDescription(found.get("cluster_id") or None, found.get("controller_id", -1), brokers)

    # -- groups ------------------------------------------------------------------------------------
    async def list_consumer_groups(self) -> list[GroupListing]:
        listed = await self._call(self._admin.list_consumer_groups())
        return [GroupListing(entry[0], entry[1] if len(entry) > 1 else "") for entry in listed]

    async def list_consumer_group_offsets(self, group: str, partitions: Iterable[TopicPartition] | None = None
                                          ) -> dict[TopicPartition, OffsetAndMetadata]:
        wanted = None if partitions is None else aio(partitions)
        found = await self._call(kafka_admin.list_consumer_group_offsets(self._admin, group, wanted,
                                                                         self._coordinators))
        return {TopicPartition(tp[0], tp[1]): OffsetAndMetadata(offset, metadata or "")
                for tp, (offset, metadata) in found.items()}

    async def list_consumer_groups_offsets(self, groups: Iterable[str]
                                           ) -> dict[str, dict[TopicPartition, OffsetAndMetadata] | Exception]:
        names = list(dict.fromkeys(groups))
        if self._batched_group_offsets and names:
            try:
                found = await group_offsets.fetch_group_offsets(self._admin, names, self._coordinators)
            except group_offsets.BatchedUnsupported:  # a broker before Kafka 3.0: one request per group
                self._batched_group_offsets = False
            except AIO_ERRORS as exc:
                raise translate(exc) from exc
            else:
                return {group: translate(answer) if isinstance(answer, Exception) else
                        {TopicPartition(topic, partition): OffsetAndMetadata(offset, metadata)
                         for (topic, partition), (offset, metadata) in answer.items()}
                        for group, answer in found.items()}
        return await super().list_consumer_groups_offsets(names)

    async def describe_consumer_group_state(self, group: str) -> str:
        return await self._call(kafka_admin.describe_consumer_group_state(self._admin, group))

    async def alter_consumer_group_offsets(self, group: str,
                                           offsets: Mapping[TopicPartition, int | tuple[int, str]]) -> None:
        await self._call(kafka_admin.alter_consumer_group_offsets(self._admin, group, offsets))

    async def delete_consumer_group_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> None:
        await self._call(kafka_admin.delete_consumer_group_offsets(self._admin, group, partitions))

    # -- ACLs --------------------------------------------------------------------------------------
    async def describe_acls(self, acl_filter: AclFilter = AclFilter()) -> list[AclBinding]:
        return await self._call(kafka_admin.describe_acls(self._admin, acl_filter))

    async def create_acls(self, bindings: Iterable[AclBinding]) -> list[tuple[AclBinding, Exception]]:
        return [(binding, translate(error)) for binding, error in
                await self._call(kafka_admin.create_acls(self._admin, bindings))]

    # -- beyond the contract: the runtime's -------------------------------------------------------
    async def fence_producers(self, transactional_ids: Iterable[str], *, timeout_ms: int = 60_000) -> None:
        """Fence every producer of ``transactional_ids`` (Kafka's ``Admin.fenceProducers``, KIP-730; see
        :func:`.kafka_admin.fence_producers`)."""
        await self._call(kafka_admin.fence_producers(self._admin, transactional_ids, timeout_ms=timeout_ms))


def _description_v12(entry) -> TopicDescription:
    """A topic of a Metadata v12 answer (:mod:`.metadata_v12`'s tuples) as the API's description."""
    code, name, _topic_id, internal, partitions = entry[:5]
    if code:
        return TopicDescription(name, (), internal, error_for_code(code, f"describing topic {name!r}"))
    return TopicDescription(name, tuple(sorted(PartitionInfo(p[1], p[2], tuple(p[4] or ()), tuple(p[5] or ()))
                                               for p in partitions)), internal)


def _description(entry: dict) -> TopicDescription:
    """A topic of aiokafka's ``describe_topics`` (dictionaries) as the API's description."""
    code = entry["error_code"]
    if code:
        return TopicDescription(entry["topic"], (), bool(entry.get("is_internal")),
                                error_for_code(code, f"describing topic {entry['topic']!r}"))
    partitions = tuple(sorted(PartitionInfo(p["partition"], p["leader"], tuple(p["replicas"]), tuple(p["isr"]))
                              for p in entry["partitions"]))
    return TopicDescription(entry["topic"], partitions, bool(entry.get("is_internal")))
