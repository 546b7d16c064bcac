"""Kafka's data as the contract names it: partitions, topics, offsets, records and fetched batches.

These are what :mod:`mirrorline.api.clients` (``context.clients``) takes and returns, so a plugin
never sees the Kafka client library the runtime happens to use. Tuples stay tuples:
:class:`TopicPartition`, :class:`OffsetAndMetadata`, :class:`ConfigEntry`... are ``NamedTuple`` s,
so ``topic, partition = tp`` and ``for name, value, *_ in entries`` work, and two partitions are
equal when their topic and number are.

Records are not copied into a class of ours on the way in: a consumer's ``getmany`` hands out the
client's own record objects, which have every attribute :class:`ConsumerRecord` documents (a
``Protocol``: type your code against it, never against a class). Fetched record batches
(:class:`FetchedBatch`) are ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:  # annotations only: the errors module imports nothing from here
    from mirrorline.api.errors import KafkaError

__all__ = [
    "BrokerInfo", "ClusterDescription", "ConfigEntry", "ConfigSource", "ConsumerRecord", "FetchedBatch",
    "GroupListing", "NewTopic", "OffsetAndMetadata", "OffsetAndTimestamp", "PartitionInfo", "TopicDescription",
    "TopicPartition",
]


class TopicPartition(NamedTuple):
    """A Kafka partition: ``(topic, partition)``."""

    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next record to consume) and the metadata committed with it (``""`` if none)."""

    offset: int
    metadata: str = ""


class OffsetAndTimestamp(NamedTuple):
    """The first offset whose record's timestamp is at or after a given time, and that record's timestamp."""

    offset: int
    timestamp: int


@dataclass(frozen=True)
class NewTopic:
    """A topic to create (Java's ``NewTopic``): ``-1`` partitions or replication factor means the
    broker's default (``num.partitions``, ``default.replication.factor``); ``configs`` are topic
    configs by Kafka's names (``cleanup.policy``...)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


class PartitionInfo(NamedTuple):
    """One partition of a described topic: its leader's node id (-1: none now), replicas and in-sync replicas."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicDescription:
    """A topic as the cluster's metadata describes it.

    ``error`` is None when the topic was described, else what the broker answered for it:
    :class:`~mirrorline.api.errors.UnknownTopicOrPartitionError` (it does not exist; describing
    never creates it), :class:`~mirrorline.api.errors.TopicAuthorizationFailedError`, or another
    :class:`~mirrorline.api.errors.KafkaError` (``code`` says which). ``partitions`` is then empty.
    """

    name: str
    partitions: tuple[PartitionInfo, ...] = ()
    internal: bool = False
    error: KafkaError | None = None


class ConfigSource:
    """Where a config's value comes from (DescribeConfigs' ``config_source`` codes)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigEntry(NamedTuple):
    """One config of a resource as DescribeConfigs answers it; ``source`` is a :class:`ConfigSource` code."""

    name: str
    value: str | None
    read_only: bool
    source: int
    sensitive: bool


class BrokerInfo(NamedTuple):
    """A broker of the cluster: node id, host, port and rack (None if unset)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class ClusterDescription:
    """The cluster's id (None if the brokers do not say), its controller's node id and its brokers."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


class GroupListing(NamedTuple):
    """A group the brokers know: its id and protocol type (``consumer``, ``connect``; ``""`` for
    groups that only store offsets)."""

    group_id: str
    protocol_type: str


class ConsumerRecord(Protocol):
    """A record a consumer returns. The objects are the Kafka client's own, not copies; these
    attributes are the contract:

    - ``topic``, ``partition``, ``offset``: where it was read;
    - ``timestamp``: epoch ms (``-1`` if the record has none); ``timestamp_type``: 0 CreateTime,
      1 LogAppendTime;
    - ``key``, ``value``: bytes or None, as written;
    - ``headers``: ``(name, bytes value)`` pairs, in order.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]]


@dataclass(slots=True)
class FetchedBatch:
    """One magic-2 record batch as fetched, ready to be returned (as a ``SourceBatch``) and written whole.

    What a consumer made with ``fetch_batches`` returns from ``getmany`` in place of records (see
    :meth:`~mirrorline.api.clients.KafkaClients.consumer`). ``data`` is exactly one batch with offset
    deltas ``0..record_count-1``, CreateTime, no delete horizon: what
    :class:`~mirrorline.api.records.SourceBatch` requires. ``source_offsets[i]`` is the offset the
    record at delta ``i`` had on the cluster it was fetched from. ``max_timestamp`` is the largest
    record timestamp as a consumer sees it (-1 if none). ``reencoded`` is False when ``data`` is the
    fetched bytes unchanged, True when the client rebuilt the batch (compacted gaps, LogAppendTime,
    legacy formats, small batches merged). ``data`` is a ``bytearray`` of this batch's own: written as a
    ``SourceBatch``, the runtime rewrites its producer fields in place (see ``SourceBatch``).
    """

    data: bytes | bytearray
    source_offsets: range | list[int]
    record_count: int
    max_timestamp: int
    reencoded: bool
