"""A client's periodic metadata refresh costs next to nothing when the cluster has not changed.

Every aiokafka client refreshes its cluster metadata every ``metadata.max.age.ms`` (Kafka's
default: 5 minutes) for all the topics it uses, and applies the answer by rebuilding its whole
view of the cluster: a tuple per partition from aiokafka's schema decoder, then a
``PartitionMetadata`` and a ``TopicPartition`` per partition. At 8,000 partitions, with a mirror's
dozen clients each holding thousands of them, that was a burst of 3-4 CPU-seconds every five
minutes on an idle worker (measured per 30 s on the scale benchmark), most of it decoding, for
answers byte-for-byte equal to the last ones.

:func:`install` changes two things, once per process:

- a Metadata answer of version 3 to 5 (what aiokafka asks for) is decoded lazily: its header
  (throttle time, brokers, cluster ID, controller) at once, by hand, and the topics only when a
  caller reads them, with aiokafka's own decoder;
- ``ClusterMetadata.update_metadata`` skips the rebuild when the answer's bytes equal those of the
  answer that cluster view last applied (nothing to change: the rebuild would make the same
  view), and does only what it does after the rebuild: the pending refresh's waiters are woken,
  the refresh times are set, the listeners are called. Any other answer is applied as before.

And, for the clients mirrorline marks with :func:`ask_for_no_topics_when_empty`, a third: while
such a client has no topics of its own (an admin client, a producer before its first record, a
consumer assigned nothing), its refresh asks for no topic, as Java's clients do, not for every
topic in the cluster, which is what aiokafka asks for when a client's topic list is empty. At
8,000 partitions those clients' first refresh (the whole cluster, decoded and built, in each of
them) was most of the burst left five minutes after start. It is opt-in per client, not
process-wide, because aiokafka also uses the empty list for "every topic" in a pattern
subscription, which does not set ``need_all_topic_metadata``; a consumer is therefore marked with
a condition that is false while it subscribes by pattern. aiokafka's own ``fetch_all_metadata``
(a separate view, for ``topics()``) still asks for all.

It relies on aiokafka's internals (pinned to a minor version for this and the other patches):
:func:`install` refuses loudly if ``update_metadata`` no longer ends the way the skip repeats, or
``_metadata_update`` no longer builds its request the way the third change expects.
"""

from __future__ import annotations

import inspect
import struct
import time
from collections.abc import Callable
from io import BytesIO
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.cluster import ClusterMetadata
from aiokafka.protocol import metadata as metadata_protocol

__all__ = ["LazyMetadataAnswer", "ask_for_no_topics_when_empty", "install", "is_installed"]

_MARKER = "_mirrorline_reuses_metadata"
#: the bytes of the answer a cluster view last applied (an attribute of that ClusterMetadata)
_APPLIED = "_mirrorline_applied_answer"
#: aiokafka's Metadata answer versions whose header is laid out as read here
_VERSIONS = (3, 4, 5)
#: what aiokafka 0.14's update_metadata does after the rebuild, which the skip repeats
_EXPECTED_STEPS = ("self._future = None", "self._need_update = False", "self._last_refresh_ms = now",
                   "self._last_successful_refresh_ms = now", "f.set_result(self)",
                   "for listener in self._listeners:", "if self.need_all_topic_metadata:")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
#: how aiokafka 0.14's _metadata_update builds its request: an empty topic list becomes None, "every topic"
_EXPECTED_REQUEST = "MetadataRequest(list(topics) if topics else None)"
#: on an AIOKafkaClient: a condition under which its empty topic list means "no topic"
_NO_TOPICS_WHEN = "_mirrorline_no_topics_when_empty"
_ORIGINAL_DECODE: dict[int, object] = {}
_ORIGINAL_UPDATE = None
_ORIGINAL_METADATA_UPDATE = None


class _NoTopics(tuple):
    """An empty topic list that aiokafka's ``_metadata_update`` takes as a list (``list(topics)``
    is ``[]``: a request for no topic) and not as "none given" (it is true, so not ``None``: all)."""

    def __bool__(self) -> bool:
        return True


_NO_TOPICS = _NoTopics()


def _always() -> bool:
    return True


def ask_for_no_topics_when_empty(client: AIOKafkaClient, when: Callable[[], bool] = _always) -> None:
    """Let ``client``'s refreshes ask for no topic (not every topic) while it has none and ``when()`` holds.

    ``when`` is asked at each refresh; a consumer passes one that is false while it subscribes by
    pattern (aiokafka's pattern subscription needs every topic). Marking a client again replaces
    its condition.
    """
    setattr(client, _NO_TOPICS_WHEN, when)


async def _metadata_update(self: AIOKafkaClient, cluster_metadata: ClusterMetadata, topics: Any) -> bool:
    """aiokafka's ``_metadata_update``, asking for no topic for a marked client's own view when it has none."""
    if not topics and cluster_metadata is self.cluster and not cluster_metadata.need_all_topic_metadata:
        when = getattr(self, _NO_TOPICS_WHEN, None)
        if when is not None and when():
            topics = _NO_TOPICS
    return await _ORIGINAL_METADATA_UPDATE(self, cluster_metadata, topics)


def _string(data: bytes, pos: int) -> tuple[str | None, int]:
    (length,) = _INT16.unpack_from(data, pos)
    pos += 2
    if length < 0:
        return None, pos
    return data[pos:pos + length].decode("utf-8"), pos + length


class LazyMetadataAnswer:
    """A Metadata answer (v3-v5) whose header is read and whose topics are decoded on first use.

    ``brokers`` is laid out as aiokafka's decoder lays it out (a list of ``(node_id, host, port,
    rack)``); every other attribute comes from aiokafka's own decoding of ``body``.
    """

    API_KEY = 3

    def __init__(self, version: int, body: bytes):
        self.API_VERSION = version
        self.body = body
        (self.throttle_time_ms,) = _INT32.unpack_from(body, 0)
        (count,) = _INT32.unpack_from(body, 4)
        pos = 8
        brokers = []
        for _ in range(count):
            (node_id,) = _INT32.unpack_from(body, pos)
            host, pos = _string(body, pos + 4)
            (port,) = _INT32.unpack_from(body, pos)
            rack, pos = _string(body, pos + 4)
            brokers.append((node_id, host, port, rack))
        self.brokers = brokers
        self.cluster_id, pos = _string(body, pos)
        (self.controller_id,) = _INT32.unpack_from(body, pos)
        self._decoded = None

    def decoded(self):
        """aiokafka's own decoding of the whole answer (made once)."""
        if self._decoded is None:
            self._decoded = _ORIGINAL_DECODE[self.API_VERSION](BytesIO(self.body))
        return self._decoded

    @property
    def topics(self) -> list:
        """The topics, decoded by aiokafka on first use."""
        return self.decoded().topics

    def __getattr__(self, name: str):
        return getattr(self.decoded(), name)


def _lazy_decode(version: int):
    def decode(cls, data):
        body = data if isinstance(data, bytes) else data.read()
        return LazyMetadataAnswer(version, body)
    return classmethod(decode)


def _refreshed_unchanged(cluster: ClusterMetadata) -> None:
    """What ``update_metadata`` does after its rebuild (see ``_EXPECTED_STEPS``), for an unchanged answer."""
    with cluster._lock:
        future = cluster._future
        cluster._future = None
        cluster._need_update = False
    now = time.time() * 1000
    cluster._last_refresh_ms = now
    cluster._last_successful_refresh_ms = now
    if future:
        future.set_result(cluster)
    for listener in cluster._listeners:
        listener(cluster)
    if cluster.need_all_topic_metadata:
        cluster._need_update = False


def update_metadata(self: ClusterMetadata, metadata) -> None:
    """``ClusterMetadata.update_metadata`` that skips rebuilding the view from an answer equal to the last one."""
    body = metadata.body if type(metadata) is LazyMetadataAnswer else None
    if body is not None and body == self.__dict__.get(_APPLIED):
        _refreshed_unchanged(self)
        return
    self.__dict__.pop(_APPLIED, None)
    _ORIGINAL_UPDATE(self, metadata)
    if body is not None and metadata.brokers:
        self.__dict__[_APPLIED] = body


def install() -> None:
    """Make unchanged metadata refreshes, and marked clients' topic-less ones, cheap in this process (idempotent)."""
    global _ORIGINAL_UPDATE, _ORIGINAL_METADATA_UPDATE
    if is_installed():
        return
    original = inspect.getattr_static(ClusterMetadata, "update_metadata")
    source = inspect.getsource(original)
    missing = [step for step in _EXPECTED_STEPS if step not in source]
    original_request = inspect.getattr_static(AIOKafkaClient, "_metadata_update")
    if _EXPECTED_REQUEST not in inspect.getsource(original_request):
        missing.append(f"AIOKafkaClient._metadata_update: {_EXPECTED_REQUEST}")
    if missing:
        raise ImportError(f"aiokafka's metadata refresh is not the one mirrorline.clients.metadata_reuse was "
                          f"written against (missing: {', '.join(missing)}); update it")
    for version in _VERSIONS:
        response = getattr(metadata_protocol, f"MetadataResponse_v{version}")
        _ORIGINAL_DECODE[version] = response.decode
        response.decode = _lazy_decode(version)
    _ORIGINAL_UPDATE = original
    _ORIGINAL_METADATA_UPDATE = original_request
    AIOKafkaClient._metadata_update = _metadata_update
    setattr(update_metadata, _MARKER, True)
    ClusterMetadata.update_metadata = update_metadata


def is_installed() -> bool:
    """Whether :func:`install` has run in this process."""
    return getattr(ClusterMetadata.update_metadata, _MARKER, False)
