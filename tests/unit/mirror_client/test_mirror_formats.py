"""Golden-byte tests for MM2 internal record formats and Connect offsets-topic JSON (mm2.md §1)."""

import json

import pytest

from mirrorline.connectors.mirror_client import formats as f
from mirrorline.connectors.mirror_client.formats import Checkpoint, Heartbeat, OffsetSync, SchemaError


def hx(text: str) -> bytes:
    """Bytes from a hex dump that may contain spaces and '|' group markers."""
    return bytes.fromhex(text.replace("|", " "))


# ---- golden examples from the reference ---------------------------------------------------

OFFSET_SYNC_KEY = hx("00 06 74 6f 70 69 63 31 00 00 00 00")
OFFSET_SYNC_VALUE = hx("00 00 00 00 00 00 00 64 00 00 00 00 00 00 00 c8")
CHECKPOINT_KEY = hx("00 02 67 31 00 03 41 2e 74 00 00 00 03")
CHECKPOINT_VALUE = hx("00 00 | 00 00 00 00 00 00 00 0a | 00 00 00 00 00 00 00 07 | 00 00")
HEARTBEAT_KEY = hx("00 01 41 00 01 42")
HEARTBEAT_VALUE = hx("00 00 00 00 01 8b cf e5 68 00")


def test_offset_sync_golden_encode():
    assert f.encode_offset_sync_key("topic1", 0) == OFFSET_SYNC_KEY
    assert len(OFFSET_SYNC_KEY) == 12
    assert f.encode_offset_sync_value(100, 200) == OFFSET_SYNC_VALUE
    assert len(OFFSET_SYNC_VALUE) == 16
    sync = OffsetSync("topic1", 0, 100, 200)
    assert sync.encode_key() == OFFSET_SYNC_KEY
    assert sync.encode_value() == OFFSET_SYNC_VALUE


def test_offset_sync_golden_decode():
    assert f.decode_offset_sync_key(OFFSET_SYNC_KEY) == ("topic1", 0)
    assert f.decode_offset_sync_value(OFFSET_SYNC_VALUE) == (100, 200)
    assert OffsetSync.decode(OFFSET_SYNC_KEY, OFFSET_SYNC_VALUE) == OffsetSync("topic1", 0, 100, 200)


def test_checkpoint_golden_encode():
    assert f.encode_checkpoint_key("g1", "A.t", 3) == CHECKPOINT_KEY
    assert f.encode_checkpoint_value(10, 7, "") == CHECKPOINT_VALUE
    assert len(CHECKPOINT_VALUE) == 20
    cp = Checkpoint("g1", "A.t", 3, 10, 7)
    assert cp.metadata == ""
    assert cp.encode_key() == CHECKPOINT_KEY
    assert cp.encode_value() == CHECKPOINT_VALUE


def test_checkpoint_golden_decode():
    assert f.decode_checkpoint_key(CHECKPOINT_KEY) == ("g1", "A.t", 3)
    assert f.decode_checkpoint_value(CHECKPOINT_VALUE) == (10, 7, "")
    assert Checkpoint.decode(CHECKPOINT_KEY, CHECKPOINT_VALUE) == Checkpoint("g1", "A.t", 3, 10, 7, "")


def test_heartbeat_golden_encode():
    assert f.encode_heartbeat_key("A", "B") == HEARTBEAT_KEY
    assert f.encode_heartbeat_value(1700000000000) == HEARTBEAT_VALUE
    hb = Heartbeat("A", "B", 1700000000000)
    assert hb.encode_key() == HEARTBEAT_KEY
    assert hb.encode_value() == HEARTBEAT_VALUE


def test_heartbeat_golden_decode():
    assert f.decode_heartbeat_key(HEARTBEAT_KEY) == ("A", "B")
    assert f.decode_heartbeat_value(HEARTBEAT_VALUE) == 1700000000000
    assert Heartbeat.decode(HEARTBEAT_KEY, HEARTBEAT_VALUE) == Heartbeat("A", "B", 1700000000000)


# ---- round trips and encoding details -----------------------------------------------------


def test_checkpoint_metadata_utf8_and_negative_offsets_round_trip():
    cp = Checkpoint("grüppe", "B.A.orders", 2147483647, -1, 9223372036854775807, "méta")
    value = cp.encode_value()
    assert value[:2] == b"\x00\x00"
    assert value[-7:] == b"\x00\x05m\xc3\xa9ta"
    assert Checkpoint.decode(cp.encode_key(), value) == cp


def test_string_length_is_utf8_byte_count():
    assert f.encode_heartbeat_key("é", "") == b"\x00\x02\xc3\xa9\x00\x00"


def test_max_length_string_accepted_and_one_more_rejected():
    ok = "x" * f.MAX_STRING_BYTES
    key = f.encode_offset_sync_key(ok, 1)
    assert key[:2] == b"\x7f\xff"
    assert f.decode_offset_sync_key(key) == (ok, 1)
    with pytest.raises(SchemaError, match="longer than 32767"):
        f.encode_offset_sync_key(ok + "x", 1)
    with pytest.raises(SchemaError):
        f.encode_checkpoint_value(1, 2, "é" * 16384)  # 32768 bytes


@pytest.mark.parametrize(
    "call",
    [
        lambda: f.encode_offset_sync_key(None, 0),
        lambda: f.encode_offset_sync_key("t", 2**31),
        lambda: f.encode_offset_sync_key("t", -(2**31) - 1),
        lambda: f.encode_offset_sync_key("t", True),
        lambda: f.encode_offset_sync_value(2**63, 0),
        lambda: f.encode_offset_sync_value(0, "1"),
        lambda: f.encode_checkpoint_value(1, 2, None),
        lambda: f.encode_heartbeat_value(1.5),
    ],
)
def test_encode_errors(call):
    with pytest.raises(SchemaError):
        call()


def test_int_boundaries_round_trip():
    for partition in (-(2**31), 2**31 - 1):
        assert f.decode_offset_sync_key(f.encode_offset_sync_key("t", partition)) == ("t", partition)
    for offset in (-(2**63), 2**63 - 1):
        assert f.decode_offset_sync_value(f.encode_offset_sync_value(offset, offset)) == (offset, offset)


# ---- trailing bytes and versions -----------------------------------------------------------


@pytest.mark.parametrize("extra", [b"\x00", b"\xff\xff\xff", b"future fields"])
def test_trailing_bytes_are_ignored(extra):
    assert f.decode_offset_sync_key(OFFSET_SYNC_KEY + extra) == ("topic1", 0)
    assert f.decode_offset_sync_value(OFFSET_SYNC_VALUE + extra) == (100, 200)
    assert f.decode_checkpoint_key(CHECKPOINT_KEY + extra) == ("g1", "A.t", 3)
    assert f.decode_checkpoint_value(CHECKPOINT_VALUE + extra) == (10, 7, "")
    assert f.decode_heartbeat_key(HEARTBEAT_KEY + extra) == ("A", "B")
    assert f.decode_heartbeat_value(HEARTBEAT_VALUE + extra) == 1700000000000


def test_future_versions_decode_with_v0_body():
    v1_checkpoint = b"\x00\x01" + CHECKPOINT_VALUE[2:] + b"\x00\x00\x00\x2a"
    assert f.decode_checkpoint_value(v1_checkpoint) == (10, 7, "")
    v1_heartbeat = b"\x00\x01" + HEARTBEAT_VALUE[2:] + b"\x01"
    assert f.decode_heartbeat_value(v1_heartbeat) == 1700000000000


def test_accepts_bytearray_and_memoryview():
    assert f.decode_offset_sync_key(bytearray(OFFSET_SYNC_KEY)) == ("topic1", 0)
    assert f.decode_heartbeat_value(memoryview(HEARTBEAT_VALUE)) == 1700000000000


# ---- decode errors -------------------------------------------------------------------------


@pytest.mark.parametrize("cut", range(len(OFFSET_SYNC_KEY)))
def test_truncated_offset_sync_key(cut):
    with pytest.raises(SchemaError):
        f.decode_offset_sync_key(OFFSET_SYNC_KEY[:cut])


@pytest.mark.parametrize("cut", range(len(CHECKPOINT_VALUE)))
def test_truncated_checkpoint_value(cut):
    with pytest.raises(SchemaError):
        f.decode_checkpoint_value(CHECKPOINT_VALUE[:cut])


@pytest.mark.parametrize(
    "decode, data",
    [
        (f.decode_offset_sync_value, OFFSET_SYNC_VALUE[:15]),
        (f.decode_checkpoint_key, CHECKPOINT_KEY[:-1]),
        (f.decode_heartbeat_key, HEARTBEAT_KEY[:-1]),
        (f.decode_heartbeat_value, HEARTBEAT_VALUE[:-1]),
        (f.decode_heartbeat_value, b""),
    ],
)
def test_short_buffers(decode, data):
    with pytest.raises(SchemaError):
        decode(data)


def test_negative_string_length():
    with pytest.raises(SchemaError, match="negative"):
        f.decode_offset_sync_key(b"\xff\xff" + b"\x00" * 10)
    with pytest.raises(SchemaError, match="negative"):
        f.decode_checkpoint_value(CHECKPOINT_VALUE[:-2] + b"\x80\x00")


def test_string_length_beyond_buffer():
    with pytest.raises(SchemaError):
        f.decode_heartbeat_key(b"\x00\x05AB")


def test_null_key_or_value_is_schema_error():
    with pytest.raises(SchemaError):
        OffsetSync.decode(OFFSET_SYNC_KEY, None)
    with pytest.raises(SchemaError):
        Checkpoint.decode(None, CHECKPOINT_VALUE)


def test_schema_error_is_value_error():
    assert issubclass(SchemaError, ValueError)


def test_invalid_utf8_is_replaced_not_rejected():
    assert f.decode_heartbeat_key(b"\x00\x01\xff\x00\x01B") == ("\ufffd", "B")


# ---- Connect offsets topic -----------------------------------------------------------------


def _java_hashmap_order(keys):
    """Iteration order of a default-capacity (16 bucket) Java HashMap holding ``keys``."""

    def java_hash(s):
        h = 0
        for ch in s:
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        return h

    def bucket(s):
        h = java_hash(s)
        return (h ^ (h >> 16)) & 15

    return sorted(keys, key=bucket)  # stable: insertion order within a bucket


def test_partition_key_order_matches_java_hashmap():
    assert list(f.source_partition("A", "t", 0)) == _java_hashmap_order(["cluster", "topic", "partition"])
    assert list(f.checkpoint_partition("g", "t", 0)) == _java_hashmap_order(["group", "topic", "partition"])
    assert list(f.heartbeat_partition("A", "B")) == _java_hashmap_order(
        ["sourceClusterAlias", "targetClusterAlias"]
    )


def test_source_connector_offset_key_golden():
    key = f.connect_offset_key_bytes("MirrorSourceConnector", f.source_partition("A", "orders", 0))
    assert key == b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]'
    assert f.connect_offset_value_bytes(f.source_offset(41)) == b'{"offset":41}'


def test_checkpoint_and_heartbeat_offset_keys():
    cp = Checkpoint("g1", "A.t", 3, 10, 7)
    assert f.connect_offset_key_bytes("MirrorCheckpointConnector", cp.connect_partition()) == (
        b'["MirrorCheckpointConnector",{"partition":3,"topic":"A.t","group":"g1"}]'
    )
    hb = Heartbeat("A", "B", 0)
    assert f.connect_offset_key_bytes("MirrorHeartbeatConnector", hb.connect_partition()) == (
        b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]'
    )
    assert f.connect_offset_value_bytes(f.source_offset()) == b'{"offset":0}'


def test_offset_value_tombstone():
    assert f.connect_offset_value_bytes(None) is None


def test_offset_key_escaping_like_jackson():
    key = f.connect_offset_key_bytes("c", f.checkpoint_partition('g"\\\n\x01é', "t", 0))
    assert key == b'["c",{"partition":0,"topic":"t","group":"g\\"\\\\\\n\\u0001\xc3\xa9"}]'
    assert f.parse_connect_offset_key(key) == ("c", {"partition": 0, "topic": "t", "group": 'g"\\\n\x01é'})


def test_parse_offset_key_semantic_comparison():
    name, partition = f.parse_connect_offset_key(
        b'[ "MirrorSourceConnector", {"topic":"orders","partition":0,"cluster":"A"} ]'
    )
    assert name == "MirrorSourceConnector"
    assert partition == f.source_partition("A", "orders", 0)
    with pytest.raises(ValueError):
        f.parse_connect_offset_key(b'{"not":"a key"}')
    assert json.loads(f.connect_offset_key_bytes("x", {"a": 1})) == ["x", {"a": 1}]
