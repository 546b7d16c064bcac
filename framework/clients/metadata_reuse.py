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

It relies on aiokafka's internals (pinned to a minor version for this and the other patches):
:func:`install` refuses loudly if ``update_metadata`` no longer ends the way the skip repeats.
"""

from __future__ import annotations

import inspect
import struct
import time
from io import BytesIO

from aiokafka.cluster import ClusterMetadata
from aiokafka.protocol import metadata as metadata_protocol

__all__ = ["LazyMetadataAnswer", "install", "is_installed"]

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
_ORIGINAL_DECODE: dict[int, object] = {}
_ORIGINAL_UPDATE = None


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
    """Make metadata refreshes with unchanged answers cheap in this process (idempotent)."""
    global _ORIGINAL_UPDATE
    if is_installed():
        return
    original = inspect.getattr_static(ClusterMetadata, "update_metadata")
    source = inspect.getsource(original)
    missing = [step for step in _EXPECTED_STEPS if step not in source]
    if missing:
        raise ImportError(f"aiokafka's ClusterMetadata.update_metadata is not the one mirrorline.clients."
                          f"metadata_reuse was written against (missing: {', '.join(missing)}); update it")
    for version in _VERSIONS:
        response = getattr(metadata_protocol, f"MetadataResponse_v{version}")
        _ORIGINAL_DECODE[version] = response.decode
        response.decode = _lazy_decode(version)
    _ORIGINAL_UPDATE = original
    setattr(update_metadata, _MARKER, True)
    ClusterMetadata.update_metadata = update_metadata


def is_installed() -> bool:
    """Whether :func:`install` has run in this process."""
    return getattr(ClusterMetadata.update_metadata, _MARKER, False)
