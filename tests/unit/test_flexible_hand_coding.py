"""Hand-written coding of hot flexible-version messages matches aiokafka's schema walker byte for byte.

OffsetFetch v8 answers (read every checkpoint cycle) and Metadata v12 requests (every refresh,
remote-topic check and topic-ID check) are read or written by hand for speed
(:mod:`mirrorline.clients.flexible_bytes`); the schema classes stay as the reference.
"""

from io import BytesIO

import pytest

from mirrorline.clients.flexible_bytes import FlexibleReader, compact_string, uvarint
from mirrorline.clients.group_offsets import OffsetFetchResponse_v8, OffsetFetchResponseV8
from mirrorline.clients.topic_ids import MetadataRequest_v12

_ZERO = bytes(16)


def _offset_fetch_answer():
    groups = []
    for g in range(70):  # over 63 entries: the array's compact length takes two varint bytes
        topics = [(f"tópico-{t}", [(p, (g * 1000 + p) * (1 << 33) if p % 2 else p, p - 1,
                                    None if p % 3 == 0 else "m" * (p * 50), 0 if p % 4 else 25, {})
                                   for p in range(g % 5)], {}) for t in range(g % 3)]
        groups.append((f"group-{g}", topics, 0 if g % 7 else 16, {}))
    groups.append(("no-topics", None, 0, {}))
    return OffsetFetchResponse_v8(12, groups, {})


def test_offset_fetch_answers_read_by_hand_equal_the_schema_decoders():
    raw = _offset_fetch_answer().encode()
    expected = OffsetFetchResponse_v8.decode(BytesIO(raw))
    got = OffsetFetchResponseV8.decode(BytesIO(raw))
    assert got.throttle_time_ms == expected.throttle_time_ms == 12
    assert len(got.groups) == 71
    assert [tuple(group[:1]) + (None if group[1] is None else [(t[0], [tuple(p) for p in t[1]]) for t in group[1]],)
            + tuple(group[2:3]) for group in got.groups] == \
        [tuple(group[:1]) + (None if group[1] is None else [(t[0], [tuple(p) for p in t[1]]) for t in group[1]],)
         + tuple(group[2:3]) for group in expected.groups]


def test_tagged_fields_in_an_offset_fetch_answer_are_stepped_over():
    # aiokafka's TaggedFields writes a value as given: each carries its own size here, as on the wire
    answer = OffsetFetchResponse_v8(0, [("g", [("t", [(0, 42, 3, "meta", 0, {7: b"\x03xyz"})],
                                                {1: uvarint(200) + b"a" * 200})], 0, {2: b"\x00"})], {5: b"\x01q"})
    got = OffsetFetchResponseV8.decode(answer.encode())
    assert got.groups == [("g", [("t", [(0, 42, 3, "meta", 0, {})], {})], 0, {})]


@pytest.mark.parametrize("cut", [1, 5, 20, -3])
def test_a_cut_offset_fetch_answer_is_a_value_error(cut):
    raw = _offset_fetch_answer().encode()
    with pytest.raises(ValueError, match="OffsetFetch v8 answer ends early"):
        OffsetFetchResponseV8.decode(raw[:cut])


@pytest.mark.parametrize("topics", [None, [], ["a"], ["ü" * 70, "x" * 249],
                                    [f"topic-{n}" for n in range(500)]])
@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True)])
def test_metadata_requests_written_by_hand_equal_the_schemas_bytes(topics, flags):
    entries = None if topics is None else [(bytes([n % 256] * 16) if n % 2 else _ZERO, name, {})
                                           for n, name in enumerate(topics)]
    request = MetadataRequest_v12(entries, *flags, {})
    assert request.encode() == MetadataRequest_v12.SCHEMA.encode([entries, *flags, {}])


def test_metadata_requests_with_tags_or_bad_ids_go_the_schemas_way():
    tagged = MetadataRequest_v12([(_ZERO, "t", {3: b"\x01x"})], False, False, {})
    assert tagged.encode() == MetadataRequest_v12.SCHEMA.encode([[(_ZERO, "t", {3: b"\x01x"})], False, False, {}])
    with pytest.raises(ValueError, match="16 bytes"):
        MetadataRequest_v12([(b"short", "t", {})], False, False, {}).encode()


def test_varints_and_compact_strings_round_trip():
    for value in (0, 1, 127, 128, 300, 16383, 16384, 2 ** 31):
        reader = FlexibleReader(uvarint(value) + b"\xff")
        assert reader.uvarint() == value and reader.pos == len(uvarint(value))
    for text in (None, "", "é" * 100):
        assert FlexibleReader(compact_string(text)).compact_string() == text
