"""Byte formats of the records MirrorMaker 2 writes to Kafka (wire-compatible with Java MM2).

Three internal record types use Kafka's *old-style protocol Struct* encoding: fields concatenated
in schema order, big-endian ``INT16``/``INT32``/``INT64``, and non-nullable ``STRING`` = ``INT16``
byte length (0..32767) followed by that many UTF-8 bytes. There are no field names, tags, counts
or padding, and no length prefix for the struct as a whole.

=============  ==================================  =============================================
Record         Key (unversioned)                    Value
=============  ==================================  =============================================
offset sync    topic STRING, partition INT32        upstreamOffset INT64, offset INT64
               (the **upstream** topic-partition)   (no version prefix)
checkpoint     group STRING, topic STRING,          version INT16 (=0), upstreamOffset INT64,
               partition INT32 (the **downstream**  offset INT64, metadata STRING
               i.e. renamed topic-partition)
heartbeat      sourceClusterAlias STRING,           version INT16 (=0), timestamp INT64 (epoch ms)
               targetClusterAlias STRING
=============  ==================================  =============================================

Ordering: every field is written in exactly the order listed above; MM2 produces all three record
types to partition 0 of single-partition, compacted topics, so the key determines what compaction
keeps (the latest sync per upstream partition, the latest checkpoint per group and downstream
partition, the latest heartbeat per cluster pair).

Reading consumes exactly the schema's fields and **ignores trailing bytes** (that is MM2's
forward-compatibility mechanism). For versioned values the Java reader decodes the V0 body whatever
the version says (its version check is a disabled ``assert``); we do the same, so a future version
that appends fields still decodes.

Failures raise :class:`SchemaError`: on read, a buffer shorter than the schema, a negative string
length or a string length beyond the remaining bytes, or a missing (``None``, e.g. tombstone)
key/value; on write, a ``None`` string, a string longer than 32767 UTF-8 bytes, or an integer that
does not fit its field. Like Java, malformed UTF-8 is decoded with replacement characters and
unencodable characters (lone surrogates) are written as ``?``; neither is an error.

The second half of this module covers the *Connect offsets topic* records that MM2's source
connectors make the Connect worker write: key ``[connector name, source partition]`` and value
``{"offset": n}`` as compact JSON. Source-partition maps are built in Java ``HashMap`` iteration
order, because Java workers look stored offsets up by exact key bytes.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SchemaError",
    "OffsetSync",
    "Checkpoint",
    "Heartbeat",
    "CHECKPOINT_VALUE_VERSION",
    "HEARTBEAT_VALUE_VERSION",
    "MAX_STRING_BYTES",
    "encode_offset_sync_key",
    "encode_offset_sync_value",
    "decode_offset_sync_key",
    "decode_offset_sync_value",
    "encode_checkpoint_key",
    "encode_checkpoint_value",
    "decode_checkpoint_key",
    "decode_checkpoint_value",
    "encode_heartbeat_key",
    "encode_heartbeat_value",
    "decode_heartbeat_key",
    "decode_heartbeat_value",
    "source_partition",
    "checkpoint_partition",
    "heartbeat_partition",
    "source_offset",
    "connect_offset_key_bytes",
    "connect_offset_value_bytes",
    "parse_connect_offset_key",
]

CHECKPOINT_VALUE_VERSION = 0
"""The only checkpoint value version MM2 defines (written as the INT16 value header)."""

HEARTBEAT_VALUE_VERSION = 0
"""The only heartbeat value version MM2 defines (written as the INT16 value header)."""

MAX_STRING_BYTES = 32767
"""Largest UTF-8 byte length a Struct ``STRING`` may have (``Short.MAX_VALUE``)."""


class SchemaError(ValueError):
    """A record could not be encoded or decoded (Java's ``SchemaException``)."""


# --------------------------------------------------------------------------------------------
# Struct primitives

_INT_FORMATS = {"INT16": (">h", 16), "INT32": (">i", 32), "INT64": (">q", 64)}


def _pack_int(kind: str, field: str, value: Any) -> bytes:
    fmt, bits = _INT_FORMATS[kind]
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchemaError(f"field {field!r}: expected an {kind} integer, got {value!r}")
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise SchemaError(f"field {field!r}: {value} does not fit in {kind}")
    return struct.pack(fmt, value)


def _pack_string(field: str, value: Any) -> bytes:
    if value is None:
        raise SchemaError(f"field {field!r}: STRING is not nullable")
    if not isinstance(value, str):
        raise SchemaError(f"field {field!r}: expected a str, got {value!r}")
    data = value.encode("utf-8", errors="replace")  # Java String.getBytes(UTF_8) writes '?'
    if len(data) > MAX_STRING_BYTES:
        raise SchemaError(
            f"field {field!r}: string is {len(data)} bytes, longer than {MAX_STRING_BYTES}"
        )
    return struct.pack(">h", len(data)) + data


class _Reader:
    """Sequential reader over one key or value; never checks that the buffer was fully consumed."""

    def __init__(self, data: Any, what: str) -> None:
        if data is None:
            raise SchemaError(f"{what} is missing (null)")
        self._buf = memoryview(bytes(data))
        self._pos = 0
        self._what = what

    def _take(self, field: str, n: int) -> memoryview:
        remaining = len(self._buf) - self._pos
        if n > remaining:
            raise SchemaError(
                f"{self._what}: error reading field {field!r}: needs {n} bytes, {remaining} left"
            )
        chunk = self._buf[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def int(self, kind: str, field: str) -> int:
        fmt, bits = _INT_FORMATS[kind]
        return struct.unpack(fmt, self._take(field, bits // 8))[0]

    def string(self, field: str) -> str:
        length = self.int("INT16", field)
        if length < 0:
            raise SchemaError(f"{self._what}: field {field!r}: string length {length} is negative")
        return bytes(self._take(field, length)).decode("utf-8", errors="replace")


# --------------------------------------------------------------------------------------------
# Offset syncs: mm2-offset-syncs.<alias>.internal


def encode_offset_sync_key(topic: str, partition: int) -> bytes:
    """Encode an offset-sync record key: the upstream topic and partition."""
    return _pack_string("topic", topic) + _pack_int("INT32", "partition", partition)


def encode_offset_sync_value(upstream_offset: int, downstream_offset: int) -> bytes:
    """Encode an offset-sync record value (no version prefix): upstream then downstream offset."""
    return _pack_int("INT64", "upstreamOffset", upstream_offset) + _pack_int(
        "INT64", "offset", downstream_offset
    )


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_TWO_INT64 = struct.Struct(">qq")


def decode_offset_sync_key(data: bytes) -> tuple[str, int]:
    """Decode an offset-sync key into ``(topic, partition)``; trailing bytes are ignored."""
    # A checkpoint task decodes every sync of the topic: a well-formed key goes the short way,
    # anything else through the reader, which says what is wrong.
    if type(data) is bytes and len(data) >= 6:
        length = _INT16.unpack_from(data)[0]
        if 0 <= length <= len(data) - 6:
            return data[2:2 + length].decode("utf-8", errors="replace"), _INT32.unpack_from(data, 2 + length)[0]
    r = _Reader(data, "offset-sync key")
    return r.string("topic"), r.int("INT32", "partition")


def decode_offset_sync_value(data: bytes) -> tuple[int, int]:
    """Decode an offset-sync value into ``(upstream_offset, downstream_offset)``."""
    if type(data) is bytes and len(data) >= 16:
        return _TWO_INT64.unpack_from(data)
    r = _Reader(data, "offset-sync value")
    return r.int("INT64", "upstreamOffset"), r.int("INT64", "offset")


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """One offset sync: upstream record offset ``upstream_offset`` landed at ``downstream_offset``.

    ``topic``/``partition`` name the **upstream** (source-cluster) topic-partition.
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def encode_key(self) -> bytes:
        """Return the Kafka record key bytes of this sync."""
        return encode_offset_sync_key(self.topic, self.partition)

    def encode_value(self) -> bytes:
        """Return the Kafka record value bytes of this sync."""
        return encode_offset_sync_value(self.upstream_offset, self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        """Build an OffsetSync from a record's key and value bytes (raises SchemaError)."""
        topic, partition = decode_offset_sync_key(key)
        upstream, downstream = decode_offset_sync_value(value)
        return cls(topic, partition, upstream, downstream)


# --------------------------------------------------------------------------------------------
# Checkpoints: <source>.checkpoints.internal


def encode_checkpoint_key(group: str, topic: str, partition: int) -> bytes:
    """Encode a checkpoint key: consumer group, then the downstream (renamed) topic-partition."""
    return (
        _pack_string("group", group)
        + _pack_string("topic", topic)
        + _pack_int("INT32", "partition", partition)
    )


def encode_checkpoint_value(upstream_offset: int, downstream_offset: int, metadata: str = "") -> bytes:
    """Encode a checkpoint value: INT16 version 0, upstream offset, downstream offset, metadata."""
    return (
        _pack_int("INT16", "version", CHECKPOINT_VALUE_VERSION)
        + _pack_int("INT64", "upstreamOffset", upstream_offset)
        + _pack_int("INT64", "offset", downstream_offset)
        + _pack_string("metadata", metadata)
    )


def decode_checkpoint_key(data: bytes) -> tuple[str, str, int]:
    """Decode a checkpoint key into ``(group, topic, partition)``; trailing bytes are ignored."""
    r = _Reader(data, "checkpoint key")
    return r.string("group"), r.string("topic"), r.int("INT32", "partition")


def decode_checkpoint_value(data: bytes) -> tuple[int, int, str]:
    """Decode a checkpoint value into ``(upstream_offset, downstream_offset, metadata)``.

    Any version number is accepted and decoded with the V0 body, as Java MM2 does.
    """
    r = _Reader(data, "checkpoint value")
    r.int("INT16", "version")
    return r.int("INT64", "upstreamOffset"), r.int("INT64", "offset"), r.string("metadata")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A consumer group's committed offset, translated for the target cluster.

    ``topic``/``partition`` name the **downstream** (target-cluster, renamed) topic-partition;
    ``metadata`` is the source commit's metadata, ``""`` when there was none.
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def encode_key(self) -> bytes:
        """Return the Kafka record key bytes of this checkpoint."""
        return encode_checkpoint_key(self.group, self.topic, self.partition)

    def encode_value(self) -> bytes:
        """Return the Kafka record value bytes of this checkpoint (version 0)."""
        return encode_checkpoint_value(self.upstream_offset, self.downstream_offset, self.metadata)

    def connect_partition(self) -> dict[str, Any]:
        """Return the Connect source partition MirrorCheckpointTask uses for this checkpoint."""
        return checkpoint_partition(self.group, self.topic, self.partition)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        """Build a Checkpoint from a record's key and value bytes (raises SchemaError)."""
        group, topic, partition = decode_checkpoint_key(key)
        upstream, downstream, metadata = decode_checkpoint_value(value)
        return cls(group, topic, partition, upstream, downstream, metadata)


# --------------------------------------------------------------------------------------------
# Heartbeats: heartbeats


def encode_heartbeat_key(source_cluster_alias: str, target_cluster_alias: str) -> bytes:
    """Encode a heartbeat key: source alias then target alias."""
    return _pack_string("sourceClusterAlias", source_cluster_alias) + _pack_string(
        "targetClusterAlias", target_cluster_alias
    )


def encode_heartbeat_value(timestamp: int) -> bytes:
    """Encode a heartbeat value: INT16 version 0 then the INT64 epoch-millisecond timestamp."""
    return _pack_int("INT16", "version", HEARTBEAT_VALUE_VERSION) + _pack_int(
        "INT64", "timestamp", timestamp
    )


def decode_heartbeat_key(data: bytes) -> tuple[str, str]:
    """Decode a heartbeat key into ``(source_cluster_alias, target_cluster_alias)``."""
    r = _Reader(data, "heartbeat key")
    return r.string("sourceClusterAlias"), r.string("targetClusterAlias")


def decode_heartbeat_value(data: bytes) -> int:
    """Decode a heartbeat value into its timestamp; any version is decoded with the V0 body."""
    r = _Reader(data, "heartbeat value")
    r.int("INT16", "version")
    return r.int("INT64", "timestamp")


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A heartbeat emitted on the target cluster for the flow source -> target at ``timestamp`` ms."""

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def encode_key(self) -> bytes:
        """Return the Kafka record key bytes of this heartbeat."""
        return encode_heartbeat_key(self.source_cluster_alias, self.target_cluster_alias)

    def encode_value(self) -> bytes:
        """Return the Kafka record value bytes of this heartbeat (version 0)."""
        return encode_heartbeat_value(self.timestamp)

    def connect_partition(self) -> dict[str, Any]:
        """Return the Connect source partition MirrorHeartbeatTask uses for this heartbeat."""
        return heartbeat_partition(self.source_cluster_alias, self.target_cluster_alias)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Heartbeat:
        """Build a Heartbeat from a record's key and value bytes (raises SchemaError)."""
        source, target = decode_heartbeat_key(key)
        return cls(source, target, decode_heartbeat_value(value))


# --------------------------------------------------------------------------------------------
# Connect offsets topic (source partitions / offsets). Dict insertion order below is Java
# HashMap iteration order for these exact key sets (16 buckets: cluster=1, partition=3,
# topic=9, group=15, sourceClusterAlias=10, targetClusterAlias=15).


def source_partition(cluster: str, topic: str, partition: int) -> dict[str, Any]:
    """Source partition of MirrorSourceConnector: ``{"cluster", "partition", "topic"}`` (upstream)."""
    return {"cluster": cluster, "partition": partition, "topic": topic}


def checkpoint_partition(group: str, topic: str, partition: int) -> dict[str, Any]:
    """Source partition of MirrorCheckpointConnector: ``{"partition", "topic", "group"}``,
    naming the downstream topic."""
    return {"partition": partition, "topic": topic, "group": group}


def heartbeat_partition(source_cluster_alias: str, target_cluster_alias: str) -> dict[str, Any]:
    """Source partition of MirrorHeartbeatConnector:
    ``{"sourceClusterAlias", "targetClusterAlias"}``."""
    return {"sourceClusterAlias": source_cluster_alias, "targetClusterAlias": target_cluster_alias}


def source_offset(offset: int = 0) -> dict[str, int]:
    """Source offset map ``{"offset": n}``: the last replicated upstream offset, or 0 for
    checkpoint and heartbeat connectors (which never resume from it)."""
    return {"offset": offset}


_JSON_SHORT_ESCAPES = {
    '"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
}


def _json_string(s: str) -> str:
    # Jackson's default escaping: '"', '\\', short escapes, other C0 controls as upper-case \u00XX;
    # everything else (including non-ASCII) is written raw.
    out = []
    for ch in s:
        if ch in _JSON_SHORT_ESCAPES:
            out.append(_JSON_SHORT_ESCAPES[ch])
        elif ch < " ":
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _json(value: Any) -> str:
    if isinstance(value, str):
        return _json_string(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json_string(str(k))}:{_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_json(v) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__} as a Connect offset JSON value")


def connect_offset_key_bytes(connector_name: str, partition: dict[str, Any]) -> bytes:
    """Offsets-topic record key: compact JSON ``[connector_name, partition]``, byte-identical to
    what a Java Connect worker writes (dict order is kept; build it with the helpers above)."""
    return _json([connector_name, partition]).encode("utf-8")


def connect_offset_value_bytes(offset: dict[str, Any] | None) -> bytes | None:
    """Offsets-topic record value: compact JSON of the offset map, or ``None`` for a tombstone."""
    return None if offset is None else _json(offset).encode("utf-8")


def parse_connect_offset_key(data: bytes) -> tuple[str, dict[str, Any]]:
    """Parse an offsets-topic key into ``(connector_name, partition)``; compare partitions as dicts.

    Raises ValueError if the bytes are not a JSON ``[string, object]`` pair.
    """
    parsed = json.loads(data)
    if (
        not isinstance(parsed, list)
        or len(parsed) != 2
        or not isinstance(parsed[0], str)
        or not isinstance(parsed[1], dict)
    ):
        raise ValueError(f"not a Connect offsets key: {bytes(data)!r}")
    return parsed[0], parsed[1]
