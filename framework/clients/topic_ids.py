"""Topic IDs (KIP-516) of named topics, read with a Metadata request that carries them.

A topic deleted and created again under the same name gets a new topic ID, while its partitions'
offsets start at 0 again. A reader that still holds an offset of the old topic cannot tell from
the offsets alone once the new topic has grown past it; the topic ID tells. aiokafka's Metadata
requests go up to v5, which has no topic IDs, so :class:`TopicIdsRequest` is Metadata **v12** (the
first version whose response carries them is v10; v12 is what Kafka 3.1+ and 4.x brokers speak,
its layout is v11's), defined with aiokafka's protocol building blocks and sent with the
consumer's own client, as :mod:`.kafka_admin` does for the requests aiokafka lacks. Metadata v9+
is a flexible version: compact strings and arrays, and tagged fields, which aiokafka encodes.

An ID is shown as Kafka shows it (``Uuid.toString()``: URL-safe base64 of the 16 bytes, no
padding). A topic the broker does not know (or answers with an error) has no ID.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from io import BytesIO
from typing import TypeAlias

from aiokafka.protocol.abstract import AbstractType
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import Boolean, CompactArray, CompactString, Int16, Int32, Schema, TaggedFields

from mirrorline.clients.flexible_bytes import compact_string, uvarint
from mirrorline.clients.metadata_v12 import MetadataCountsV12, MetadataResponseV12

_METADATA_API_KEY = 3
_ZERO = bytes(16)
#: Topics named per Metadata request: at thousands of topics one answer takes long to decode (the
#: event loop stalls meanwhile) and a caller's timeout covers the whole of it.
TOPICS_PER_REQUEST = 500


class Uuid(AbstractType[bytes]):
    """Kafka's UUID: 16 raw bytes."""

    @classmethod
    def encode(cls, value: bytes) -> bytes:
        if len(value) != 16:
            raise ValueError(f"a UUID is 16 bytes, not {len(value)}")
        return value

    @classmethod
    def decode(cls, data: BytesIO) -> bytes:
        value = data.read(16)
        if len(value) != 16:
            raise ValueError("Buffer underrun decoding UUID")
        return value


class MetadataResponse_v12(Response):
    """Metadata v12 response (flexible): brokers, cluster, and per topic its ID and partitions."""

    API_KEY = _METADATA_API_KEY
    API_VERSION = 12
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("brokers", CompactArray(
            ("node_id", Int32), ("host", CompactString("utf-8")), ("port", Int32), ("rack", CompactString("utf-8")),
            ("tags", TaggedFields))),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        ("topics", CompactArray(
            ("error_code", Int16),
            ("name", CompactString("utf-8")),
            ("topic_id", Uuid),
            ("is_internal", Boolean),
            ("partitions", CompactArray(
                ("error_code", Int16), ("partition_index", Int32), ("leader_id", Int32), ("leader_epoch", Int32),
                ("replica_nodes", CompactArray(Int32)), ("isr_nodes", CompactArray(Int32)),
                ("offline_replicas", CompactArray(Int32)), ("tags", TaggedFields))),
            ("topic_authorized_operations", Int32),
            ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class MetadataRequest_v12(RequestStruct):
    """Metadata v12 request: topics by ID or name (ID all zeros: by name), no auto-creation.

    Its answer is read by :mod:`.metadata_v12`'s hand decoder; :class:`MetadataResponse_v12` is the
    same layout as a schema, kept to encode answers in tests and to check the decoder against.
    """

    FLEXIBLE_VERSION = True
    API_KEY = _METADATA_API_KEY
    API_VERSION = 12
    RESPONSE_TYPE = MetadataResponseV12
    SCHEMA = Schema(
        ("topics", CompactArray(("topic_id", Uuid), ("name", CompactString("utf-8")), ("tags", TaggedFields))),
        ("allow_auto_topic_creation", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )

    def encode(self) -> bytes:
        """The request's bytes, written by hand: the schema walker's encoding of a few hundred topic
        names, every topic-ID check and remote-topic check, cost as much as decoding the answer.
        Byte for byte what the schema writes (a test holds them equal); tagged fields, which
        nothing here sets, go through the schema."""
        fields = self.__dict__
        topics = fields["topics"]
        if fields["tags"] or (topics and any(tags for _id, _name, tags in topics)):
            return super().encode()
        if topics is None:
            parts = [b"\x00"]
        else:
            parts = [uvarint(len(topics) + 1)]
            for topic_id, name, _tags in topics:
                if len(topic_id) != 16:
                    raise ValueError(f"a UUID is 16 bytes, not {len(topic_id)}")
                parts += (topic_id, compact_string(name), b"\x00")
        parts.append(b"\x01" if fields["allow_auto_topic_creation"] else b"\x00")
        parts.append(b"\x01" if fields["include_topic_authorized_operations"] else b"\x00")
        parts.append(b"\x00")
        return b"".join(parts)


class MetadataCountsRequest_v12(MetadataRequest_v12):
    """The same request, its answer read with partitions counted only (:class:`MetadataCountsV12`)."""

    RESPONSE_TYPE = MetadataCountsV12


TopicIdsRequestStruct: TypeAlias = MetadataRequest_v12


def _by_name(topics: Iterable[str] | None) -> list | None:
    """A Metadata v12 request's topic entries naming ``topics`` (ID all zeros); None asks for every topic."""
    return None if topics is None else [(_ZERO, name, {}) for name in topics]


class TopicIdsRequest(Request[TopicIdsRequestStruct]):
    """The metadata of ``topics`` (by name; None: every topic), never creating one.

    Brokers below v12 (Kafka before 3.1) cannot answer it: sending it raises ``NotImplementedError``.
    """

    API_KEY = _METADATA_API_KEY

    def __init__(self, topics: Iterable[str] | None):
        self._topics = _by_name(topics)

    def build(self, request_struct_class: type[TopicIdsRequestStruct]) -> TopicIdsRequestStruct:
        """Instantiate the chosen version's struct with this request's fields."""
        return request_struct_class(self._topics, False, False, {})


class PartitionCountsRequest(Request[MetadataCountsRequest_v12]):
    """Like :class:`TopicIdsRequest`; each topic's partitions come back as their count."""

    API_KEY = _METADATA_API_KEY

    def __init__(self, topics: Iterable[str] | None):
        self._topics = _by_name(topics)

    def build(self, request_struct_class: type[MetadataCountsRequest_v12]) -> MetadataCountsRequest_v12:
        """Instantiate the chosen version's struct with this request's fields."""
        return request_struct_class(self._topics, False, False, {})


def uuid_string(raw: bytes) -> str:
    """A topic ID as Kafka prints it (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def topic_ids_of(response) -> dict[str, str]:
    """``{topic: ID}`` for each topic a Metadata v10+ response describes without error (ID not all zeros)."""
    found: dict[str, str] = {}
    for error_code, name, topic_id, *_ in response.topics:
        if error_code == 0 and name is not None and topic_id != _ZERO:
            found[name] = uuid_string(topic_id)
    return found


async def read_topic_ids(client, topics: Iterable[str], node_id: int | None = None) -> dict[str, str]:
    """The IDs of ``topics`` as broker ``node_id`` (any known broker when None or unknown) sees them.

    ``client`` is a started aiokafka client (a consumer's ``_client``). Topics the broker does not
    know are left out. Raises aiokafka's errors (connection, timeout), and ``NotImplementedError``
    when the broker has no Metadata v12 (older than Kafka 3.1). Asks in requests of at most
    :data:`TOPICS_PER_REQUEST` topics.
    """
    names = sorted(set(topics))
    if not names:
        return {}
    if node_id is None or client.cluster.broker_metadata(node_id) is None:
        node_id = client.get_random_node()
        if node_id is None:
            await client.force_metadata_update()
            node_id = client.get_random_node()
    found: dict[str, str] = {}
    for start in range(0, len(names), TOPICS_PER_REQUEST):
        response = await client.send(node_id, PartitionCountsRequest(names[start:start + TOPICS_PER_REQUEST]))
        found.update(topic_ids_of(response))
    return found
