"""Kafka clients as the contract offers them to plugins: ``context.clients`` and ``launcher.clients``.

A plugin talks to Kafka only through :class:`KafkaClients`, which the runtime implements
(``mirrorline.clients``) and hands out on every context
(:attr:`~mirrorline.api.context.PluginContext.clients`) and on the
:class:`~mirrorline.api.launcher.WorkerLauncher` given to CLI commands. It builds an
:class:`Admin`, a :class:`Consumer` or a :class:`Producer` from Java-style client settings
(``bootstrap.servers``, ``security.protocol``, ``ssl.*``, ``sasl.*``, ``isolation.level``...); a
test may hand a plugin its own implementation (``mirrorline.testing.plugin_kit`` does).

Everything they take and return is mirrorline's: partitions, topics, offsets and fetched batches
from :mod:`mirrorline.api.kafka`, records typed by the
:class:`~mirrorline.api.kafka.ConsumerRecord` protocol, the ACL types below (:class:`AclBinding`,
:class:`AclFilter` and Kafka's numeric codes). What they raise is a
:class:`~mirrorline.api.errors.KafkaError` (a :class:`~mirrorline.api.errors.ConnectError`), one
of its subclasses in :mod:`mirrorline.api.errors`, or :class:`~mirrorline.api.errors.ConfigError`
for settings that are wrong before any connection. Which Kafka client library runs underneath is
the runtime's business: no plugin imports it.

Every client is made unstarted: ``await client.start()`` (or ``async with client:``) connects it,
``stop()`` / ``close()`` releases it.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from mirrorline.api.kafka import (ClusterDescription, ConfigEntry, ConsumerRecord, FetchedBatch, GroupListing,
                                  NewTopic, OffsetAndMetadata, OffsetAndTimestamp, TopicDescription, TopicPartition)
from mirrorline.api.records import RecordMetadata

__all__ = [
    "AclBinding", "AclFilter", "AclOperation", "AclPermissionType", "Admin", "BatchFetch", "Consumer", "KafkaClients",
    "PatternType", "Producer", "ResourceType",
]

class ResourceType(IntEnum):
    """Kafka's ResourceType codes (``ANY`` only in filters)."""
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """Kafka's PatternType codes (``ANY`` and ``MATCH`` only in filters)."""
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Kafka's AclOperation codes (``ANY`` only in filters)."""
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    """Kafka's AclPermissionType codes (``ANY`` only in filters)."""
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True)
class AclBinding:
    """One ACL: ``principal`` (``User:name``) from ``host`` (``*`` for any) is ``permission_type``-ed
    ``operation`` on the resource ``resource_name`` of ``resource_type``, matched as ``pattern_type``
    (LITERAL: that exact name, or ``*`` for every resource; PREFIXED: every name starting with it).
    """

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        def name(value) -> str:
            return getattr(value, "name", str(value))
        return (f"{name(self.permission_type)} {self.principal} {name(self.operation)} from {self.host} on "
                f"{name(self.resource_type)} {name(self.pattern_type)} {self.resource_name!r}")


@dataclass(frozen=True)
class AclFilter:
    """Which ACLs :meth:`KafkaClients.describe_acls` returns; ``None`` and the ``ANY`` codes match everything.

    ``pattern_type=MATCH`` returns every binding that applies to ``resource_name`` (literal,
    wildcard and prefixed); ``ANY`` only bindings whose own name equals ``resource_name``.
    """

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def exactly(cls, binding: AclBinding) -> AclFilter:
        """The filter matching ``binding`` and nothing else."""
        return cls(binding.resource_type, binding.resource_name, binding.pattern_type, binding.principal,
                   binding.host, binding.operation, binding.permission_type)


class _Client(ABC):
    """What every client has: a start, a stop, ``async with``, and what its settings meant."""

    #: Settings given that mean nothing to this kind of client (logged by the caller if it cares).
    ignored_settings: list[str]
    #: The SASL user name the client logs in as (None without SASL): for messages naming the principal.
    principal: str | None

    @abstractmethod
    async def start(self) -> None:
        """Connect (bootstrap): :class:`~mirrorline.api.errors.KafkaConnectionError` when no broker answers."""

    @abstractmethod
    async def stop(self) -> None:
        """Release connections and background work; the client cannot be started again."""

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.stop()


class Admin(_Client):
    """An admin client of one cluster (Java's ``Admin``, the calls MM2 and Connect make).

    ``close()`` is ``stop()``. Topics that do not exist are never created by asking about them.
    """

    async def close(self) -> None:
        """The same as :meth:`stop`."""
        await self.stop()

    @abstractmethod
    async def list_topics(self) -> list[str]:
        """Every topic's name, internal ones (``__consumer_offsets``) included."""

    @abstractmethod
    async def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicDescription]:
        """``topics`` (every topic when None) with their partitions; a topic the broker could not
        describe comes back with its ``error`` (e.g. UnknownTopicOrPartitionError), not raised."""

    async def partition_counts(self, topics: Iterable[str] | None = None) -> dict[str, int]:
        """``{topic: partition count}`` of ``topics`` (every topic when None) that the broker described
        without error. The same answer as :meth:`describe_topics`, for callers that need no more:
        an implementation may read it without building every partition's description (thousands
        of partitions, on every topic refresh)."""
        return {entry.name: len(entry.partitions) for entry in await self.describe_topics(topics)
                if entry.error is None}

    @abstractmethod
    async def create_topics(self, topics: Iterable[NewTopic], timeout_ms: int = 30_000) -> dict[str, Any]:
        """Create ``topics``; ``{name: None}`` for each created, ``{name: error}`` (a
        :class:`~mirrorline.api.errors.KafkaError`, e.g. ``TopicAlreadyExistsError``, with the
        broker's message) for each refused. Partitions or replication factor ``-1``: the broker's default."""

    @abstractmethod
    async def create_partitions(self, new_totals: Mapping[str, int]) -> None:
        """Grow each topic to the given total partition count; raises the broker's error for the first
        topic refused (``InvalidPartitionsError``-like, code 37, when it has that many already)."""

    @abstractmethod
    async def describe_topic_configs(self, topics: Iterable[str]) -> dict[str, list[ConfigEntry]]:
        """Every config of each topic (DescribeConfigs); topics the broker answered with an error are left out."""

    @abstractmethod
    async def incremental_alter_configs(self, topic: str, set_configs: Mapping[str, str],
                                        delete_configs: Iterable[str] = ()) -> None:
        """Set and/or delete configs of ``topic`` without touching any other config (IncrementalAlterConfigs)."""

    @abstractmethod
    async def describe_cluster(self) -> ClusterDescription:
        """The cluster's id, controller and brokers."""

    @abstractmethod
    async def list_consumer_groups(self) -> list[GroupListing]:
        """Every group the brokers coordinate."""

    @abstractmethod
    async def list_consumer_group_offsets(self, group: str, partitions: Iterable[TopicPartition] | None = None
                                          ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The committed offsets of ``group`` (only ``partitions`` if given; ``-1`` offset: none)."""

    async def list_consumer_groups_offsets(self, groups: Iterable[str]
                                           ) -> dict[str, dict[TopicPartition, OffsetAndMetadata] | Exception]:
        """Every committed offset of each of ``groups``; a group that could not be read maps to its
        error, the others are unaffected. This default asks group by group; a client may ask many
        groups at once (Kafka 3.0+ brokers answer many in one request)."""
        out: dict[str, dict[TopicPartition, OffsetAndMetadata] | Exception] = {}
        for group in dict.fromkeys(groups):
            try:
                out[group] = await self.list_consumer_group_offsets(group)
            except Exception as exc:  # noqa: BLE001 - the caller is told per group
                out[group] = exc
        return out

    @abstractmethod
    async def describe_consumer_group_state(self, group: str) -> str:
        """The state of ``group`` as the broker names it: "Empty", "Stable", ..., "Dead" when it does not exist."""

    @abstractmethod
    async def alter_consumer_group_offsets(self, group: str,
                                           offsets: Mapping[TopicPartition, int | tuple[int, str]]) -> None:
        """Set committed offsets of ``group`` (partition -> offset or ``(offset, metadata)``) as an admin would.

        The broker accepts it only while the group has no active members; otherwise
        :class:`~mirrorline.api.errors.GroupNotEmptyError` is raised.
        """

    @abstractmethod
    async def delete_consumer_group_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> None:
        """Delete the committed offsets of ``group`` for ``partitions`` (OffsetDelete);
        :class:`~mirrorline.api.errors.GroupNotEmptyError` while a member reads those topics."""

    @abstractmethod
    async def describe_acls(self, acl_filter: AclFilter = AclFilter()) -> list[AclBinding]:
        """The ACLs ``acl_filter`` matches. Needs DESCRIBE on the cluster (else
        ``ClusterAuthorizationFailedError``; ``SecurityDisabledError`` when the cluster has no authorizer)."""

    @abstractmethod
    async def create_acls(self, bindings: Iterable[AclBinding]) -> list[tuple[AclBinding, Exception]]:
        """Create ``bindings``; returns the ones refused, with the error. Needs ALTER on the cluster
        (else ``ClusterAuthorizationFailedError`` is raised at the first binding)."""


class Consumer(_Client):
    """A consumer of assigned partitions (no group: it never commits), positioned by ``seek``.

    Partitions are :class:`~mirrorline.api.kafka.TopicPartition`. ``getmany`` returns the Kafka
    client's own record objects (the :class:`~mirrorline.api.kafka.ConsumerRecord` protocol),
    uncopied; a consumer made with ``fetch_batches`` returns
    :class:`~mirrorline.api.kafka.FetchedBatch` items instead (see :meth:`KafkaClients.consumer`).
    """

    #: Whether it reads committed records only (``isolation.level=read_committed``).
    read_committed: bool

    @abstractmethod
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly ``partitions`` from now on; each starts where ``auto.offset.reset`` says
        unless :meth:`seek` places it."""

    @abstractmethod
    def assignment(self) -> set[TopicPartition]:
        """The partitions assigned now."""

    @abstractmethod
    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read ``partition`` from ``offset`` at the next fetch."""

    @abstractmethod
    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move the partitions (every assigned one if none given) to their log start."""

    @abstractmethod
    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move the partitions (every assigned one if none given) to their end."""

    @abstractmethod
    async def position(self, partition: TopicPartition) -> int:
        """The offset of the next record to fetch, waiting for a pending reset to resolve it."""

    @abstractmethod
    def fetch_position(self, partition: TopicPartition) -> int | None:
        """The offset of the next record to fetch now, without waiting: None while not known or not assigned."""

    @abstractmethod
    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark as of the last fetch (None before one)."""

    @abstractmethod
    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        """The partition's last stable offset as of the last fetch (read_committed consumers; None before one)."""

    def fetch_states(self, partitions: Iterable[TopicPartition]
                     ) -> list[tuple[TopicPartition, int | None, int | None, int | None]]:
        """``(partition, fetch position, high watermark, last stable offset)`` of each of ``partitions``,
        as :meth:`fetch_position`, :meth:`highwater` and :meth:`last_stable_offset` give them. For
        sweeps over thousands of partitions: a consumer may answer it in one pass."""
        return [(tp, self.fetch_position(tp), self.highwater(tp), self.last_stable_offset(tp)) for tp in partitions]

    def fetch_state_changes(self) -> set[TopicPartition] | None:
        """The partitions whose high watermark, last stable offset or fetch position a fetch answer may
        have moved since the previous call, so a sweep over thousands of partitions can read only
        those; None when the consumer cannot tell (read them all). Positions the caller moves itself
        (a seek, a reset, records it consumed) are not included. This default cannot tell."""
        return None

    @abstractmethod
    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord | FetchedBatch]]:
        """What was fetched since the last call (of ``partitions`` only, if given), waiting up to
        ``timeout_ms`` for something. Records of one partition come in offset order."""

    @abstractmethod
    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's log start offset."""

    @abstractmethod
    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's end: the high watermark, or the last stable offset for read_committed."""

    @abstractmethod
    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first record at or after the timestamp (epoch ms); None if there is none."""

    @abstractmethod
    async def topics(self) -> set[str]:
        """Every topic's name (Java's ``listTopics``), from the cluster's metadata."""

    def topic_change_signs(self) -> set[str]:
        """Topics whose partitions a fetch was answered with an error that can mean the topic was
        deleted or re-created (unknown topic, not the leader, a leader epoch error, offset out of
        range...) since the last call; cleared by the call. Cheap when there is none (call it
        after every ``getmany``). The consumer still handles the error itself as it always did.

        The default (a consumer that does not watch its fetches) never reports one.
        """
        return set()

    async def topic_ids(self, topics: Iterable[str]) -> dict[str, str] | None:
        """Each topic's ID (KIP-516, as Kafka prints it): a topic deleted and created again under
        the same name has a new one. A topic reported by :meth:`topic_change_signs` is asked of the
        broker whose fetch answer reported it (it has seen the change, so it cannot answer the
        old ID); the others of any broker. Topics the cluster does not know are left out.

        None when the cluster or the client cannot tell topic IDs (brokers before Kafka 3.1; the
        default). Raises :class:`~mirrorline.api.errors.KafkaError` when the brokers cannot be asked.
        """
        return None

    @abstractmethod
    def pause(self, *partitions: TopicPartition) -> None:
        """Fetch nothing more of ``partitions`` until :meth:`resume`."""

    @abstractmethod
    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch ``partitions`` again."""


class Producer(_Client):
    """A producer (``acks``, ``linger.ms``, ``compression.type``... from its settings).

    Beyond a Java producer: it writes records with neither key nor value, and a record naming a
    partition the metadata does not know yet is held (bounded by ``max.block.ms``) until it is
    known, then raises the retriable :class:`~mirrorline.api.errors.PartitionNotAvailableError`.
    It is never sent elsewhere. Topics are never auto-created by asking for their metadata.
    """

    @abstractmethod
    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: list[tuple[str, bytes]] | None = None) -> asyncio.Future[RecordMetadata]:
        """Queue one record; returns once it is queued. The future resolves to where Kafka stored it,
        or raises the :class:`~mirrorline.api.errors.KafkaError` that refused it."""

    async def send_and_wait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                            partition: int | None = None, timestamp_ms: int | None = None,
                            headers: list[tuple[str, bytes]] | None = None) -> RecordMetadata:
        """:meth:`send`, then wait for the acknowledgement."""
        return await (await self.send(topic, value, key, partition, timestamp_ms, headers))

    @abstractmethod
    async def flush(self) -> None:
        """Wait until every record queued so far is acknowledged or failed."""

    @abstractmethod
    async def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of ``topic`` (fetching its metadata if needed)."""


@dataclass(frozen=True)
class BatchFetch:
    """How a consumer hands out whole record batches (see :meth:`KafkaClients.consumer`).

    ``coalesce_bytes``: runs of consecutive batches of one partition smaller than this are merged
    into batches of up to this size (records re-encoded, in order, with their own timestamps, keys,
    values, headers and the codec they share); 0 keeps every batch as fetched.
    """

    coalesce_bytes: int = 0


class KafkaClients(ABC):
    """Builds Kafka clients from Java-style client settings.

    Settings are Kafka's own names (``bootstrap.servers``, ``client.id``, ``security.protocol``,
    ``ssl.*``, ``sasl.*``, ``acks``, ``isolation.level``...) as strings or parsed values; a setting
    that means nothing to the kind of client made lands in its ``ignored_settings``. Every factory
    raises :class:`~mirrorline.api.errors.ConfigError` with one line naming the setting (never a
    secret) when a security setting is wrong.
    """

    @abstractmethod
    def admin(self, props: Mapping[str, Any]) -> Admin:
        """An unstarted admin client."""

    @abstractmethod
    def consumer(self, props: Mapping[str, Any], *, fetch_batches: BatchFetch | None = None,
                 fetch_sessions: bool = False, gather_max_wait_ms: int | None = None,
                 gather_trickle_wait_ms: int | None = None, share: str | None = None) -> Consumer:
        """An unstarted consumer. ``group.id`` and ``enable.auto.commit`` are ignored: it never commits.

        With ``fetch_sessions``, the consumer fetches with incremental fetch sessions (KIP-227, as
        Java's consumer always does): after a first full fetch, a request to a broker names only the
        partitions whose position changed, and the answer only those with news. For consumers of
        thousands of mostly idle partitions; records, positions and errors are the same either way.
        While records flow from a broker, such a consumer's fetches also ask it to gather 1 MiB
        for at most ``gather_max_wait_ms`` (None: 25 ms) before answering, so a flow is read in
        fewer, larger fetches; 0 never waits longer than the consumer's own ``fetch.min.bytes``
        asks for. While the consumer's records come in slower than 2 MiB/s, the wait is
        ``gather_trickle_wait_ms`` instead (None: 10 ms; never longer than the gather wait): the
        wait is what a record of a trickle may spend on the source broker.

        With ``fetch_batches``, ``getmany`` returns each partition's data as
        :class:`~mirrorline.api.kafka.FetchedBatch` items, the record batches as the broker sent
        them (beyond Connect, for tasks that return :class:`~mirrorline.api.records.SourceBatch`):
        control batches and, with read_committed, aborted transactions are left out exactly as a
        consumer leaves out their records; batches a broker would not store unchanged (compacted
        gaps, LogAppendTime, a delete horizon, legacy formats, a first batch starting before the
        position) are rebuilt as plain magic-2 CreateTime batches; every batch's CRC is checked
        first (unless ``check.crcs=false``). Positions, seeks, errors and ``highwater`` work as for
        records. If the client cannot capture a fetch's bytes, that partition's records come as
        records (slower, never wrong), so a caller handles both kinds.

        With ``share`` (beyond Connect; a task passes its context's ``client_share``), consumers
        asked for under the same share name and with the same settings in one process are one
        consumer underneath: one connection and one fetch per broker for all of them, so a fetch
        carries the records of every member. Each member still reads, seeks, pauses and positions
        only the partitions it assigned, gets only their records and errors, and its own
        ``fetch_state_changes`` and ``topic_change_signs``. Members must assign disjoint partitions:
        a partition assigned by one is taken from any other that held it. Start and stop each
        member as any consumer; the last to stop closes the connections.
        """

    @abstractmethod
    def producer(self, props: Mapping[str, Any]) -> Producer:
        """An unstarted producer (see :class:`Producer`)."""

    @abstractmethod
    async def security_problem(self, props: Mapping[str, Any], timeout_s: float = 10.0) -> str | None:
        """Why these client settings cannot log in to the cluster (one line), or None.

        None also when no broker can be reached at all: the caller's own error says that.
        """

    def quiet_logs(self) -> contextlib.AbstractContextManager:
        """A context manager that silences the Kafka client library's own log records (each failed
        connection attempt is an ERROR) unless the root logger is at DEBUG.

        For one-shot commands that report a failure themselves, once, as one line. The level is
        process-wide: not for use while workers run. The default silences nothing.
        """
        return contextlib.nullcontext()
