"""The hand decoder of Metadata v12 answers reads what aiokafka's schema decoder reads."""

from io import BytesIO

import pytest
from aiokafka.protocol.types import TaggedFields

from mirrorline.clients.metadata_v12 import MetadataCountsV12, MetadataResponseV12, decode
from mirrorline.clients.topic_ids import MetadataResponse_v12


def _answer(topics: int, partitions: int):
    brokers = [(1, "localhost", 9092, None, {}), (2, "höst-2", 9093, "rack-b", {})]
    described = []
    for t in range(topics):
        parts = [(0, p, 1 + p % 2, 7, [1, 2], [1] if p % 3 else [1, 2], [] if p % 5 else [2], {})
                 for p in range(partitions)]
        described.append((0, f"topic-{t}", bytes([t % 256] * 16), t == 0, parts, -2147483648, {}))
    described.append((3, "missing", bytes(16), False, [], -2147483648, {}))
    return MetadataResponse_v12(25, brokers, "cluster-ü", 2, described, {})


def _plain(partition) -> tuple:
    """A partition entry with its node lists as tuples (the schema decoder gives lists)."""
    return tuple(tuple(field) if isinstance(field, (list, tuple)) else field for field in partition)


def test_hand_decoder_matches_the_schema_decoder():
    raw = _answer(topics=40, partitions=7).encode()
    expected = MetadataResponse_v12.decode(BytesIO(raw))
    got = decode(raw)
    assert got.throttle_time_ms == expected.throttle_time_ms == 25
    assert got.cluster_id == expected.cluster_id == "cluster-ü"
    assert got.controller_id == expected.controller_id
    assert [tuple(b) for b in got.brokers] == [tuple(b) for b in expected.brokers]
    assert len(got.topics) == 41
    for mine, theirs in zip(got.topics, expected.topics):
        assert mine[:4] == tuple(theirs[:4])
        assert mine[5] == theirs[5]
        assert [_plain(p) for p in mine[4]] == [_plain(p) for p in theirs[4]]


def test_response_type_reads_from_the_frame_position():
    """aiokafka hands the decoder a BytesIO already past the response header."""
    frame = BytesIO(b"HEADER" + _answer(topics=2, partitions=3).encode())
    frame.seek(6)
    answer = MetadataResponseV12.decode(frame)
    assert [t[1] for t in answer.topics] == ["topic-0", "topic-1", "missing"]
    assert answer.topics[0][3] is True and answer.topics[1][3] is False


def test_an_answer_seen_recently_is_not_decoded_again_and_a_changed_one_is(monkeypatch):
    """An idle mirror asks the same questions every refresh; the same bytes are decoded once."""
    from mirrorline.clients import metadata_v12

    monkeypatch.setattr(MetadataCountsV12, "_recent", metadata_v12._RecentAnswers(2))
    decoded = []
    real_decode = metadata_v12.decode
    monkeypatch.setattr(metadata_v12, "decode", lambda *a: decoded.append(a) or real_decode(*a))
    first, second, third = (_answer(topics=n, partitions=2).encode() for n in (1, 2, 3))

    def frame(raw):
        framed = BytesIO(b"HDR" + raw)
        framed.seek(3)
        return MetadataCountsV12.decode(framed)

    one = frame(first)
    assert frame(first) is one and len(decoded) == 1
    assert [t[4] for t in one.topics] == [2, 0]  # counted: the missing topic has none
    frame(second)
    frame(first)  # still recent: the least recently used is `second`
    frame(third)  # evicts `second`
    assert len(decoded) == 3
    frame(first)
    assert len(decoded) == 3
    frame(second)
    assert len(decoded) == 4


def test_tagged_fields_are_skipped():
    """Unknown tagged fields (a newer broker's additions) are stepped over, not misread."""
    tags = TaggedFields.encode({5: b"xyz"})
    plain = MetadataResponse_v12(0, [(1, "h", 1, None, {})], None, 1,
                                 [(0, "t", bytes(16), False, [(0, 0, 1, 0, [1], [1], [], {})], 0, {})], {}).encode()
    # the answer's own tagged fields are its last byte (an empty set): replace them with one field
    tagged = plain[:-1] + tags
    assert decode(tagged).topics[0][4][0][:4] == (0, 0, 1, 0)
    assert decode(tagged).cluster_id is None


def test_truncated_answer_is_a_value_error():
    raw = _answer(topics=3, partitions=4).encode()
    with pytest.raises(ValueError, match="ends early"):
        decode(raw[: len(raw) // 2])


class _OldBrokerAdmin:
    """aiokafka's admin client in front of a broker without Metadata v12 (Kafka before 3.1)."""

    def __init__(self):
        self.sent = 0

    async def _send_request(self, request):
        self.sent += 1
        raise NotImplementedError("Support for TopicIdsRequest v0 has not yet been added")

    async def describe_topics(self, topics):
        return [{"error_code": 0, "topic": "t", "is_internal": False,
                 "partitions": [{"partition": 1, "leader": 2, "replicas": [2], "isr": [2]},
                                {"partition": 0, "leader": 1, "replicas": [1], "isr": [1]}]}]


async def test_admin_falls_back_to_aiokafkas_request_on_an_old_broker():
    from mirrorline.clients.admin import KafkaAdmin
    admin = KafkaAdmin({"bootstrap_servers": "localhost:1"})
    admin._admin = old = _OldBrokerAdmin()
    for _ in range(2):
        [topic] = await admin.describe_topics()
        assert [p.partition for p in topic.partitions] == [0, 1] and topic.partitions[1].leader == 2
    assert old.sent == 1  # asked once: the fallback sticks


def test_counting_decoder_counts_what_the_full_one_reads():
    raw = _answer(topics=30, partitions=6).encode()
    full, counted = decode(raw), decode(raw, details=False)
    assert [(t[0], t[1], t[2], t[3], len(t[4]), t[5]) for t in full.topics] == [t[:6] for t in counted.topics]
    assert counted.brokers == full.brokers and counted.cluster_id == full.cluster_id
    with pytest.raises(ValueError, match="ends early"):
        decode(raw[: len(raw) - 40], details=False)


def test_tagged_fields_anywhere_are_stepped_over():
    # aiokafka's TaggedFields writes a value as given, so each value here carries its own size byte.
    # The reader once added a tag's size to the position from before reading that size: a broker
    # entry with a tag threw the rest of the answer off.
    answer = MetadataResponse_v12(
        0, [(1, "h", 1, None, {2: b"\x02ab"}), (2, "i", 2, "r", {})], "c", 1,
        [(0, "t", bytes(16), False, [(0, 0, 1, 0, [1], [1], [], {4: b"\x01z"})], 0, {1: b"\x00"})], {3: b"\x02ab"})
    got = decode(answer.encode())
    assert [b[:4] for b in got.brokers] == [(1, "h", 1, None), (2, "i", 2, "r")]
    assert got.controller_id == 1
    assert [(t[1], [tuple(p[:4]) for p in t[4]]) for t in got.topics] == [("t", [(0, 0, 1, 0)])]
