"""The compiled codecs give exactly what aiokafka's schema walk gives, on every hot message version.

Each message class gets generated messages (nulls, empty and several-element arrays, multi-byte
strings, the extremes of every integer width); the compiled encoder must produce aiokafka's bytes
and the compiled decoder aiokafka's values, from a bare frame and from a BytesIO past a header as
the connection hands it over. Truncated frames and values that do not fit must fail as aiokafka
fails: with ValueError.
"""

from __future__ import annotations

import io
import random
import struct

import pytest
from aiokafka.protocol.fetch import FetchRequest_v11, FetchResponse_v11
from aiokafka.protocol.produce import ProduceRequest_v8, ProduceResponse_v8
from aiokafka.protocol.struct import Struct
from aiokafka.protocol import types
from aiokafka.protocol.types import Array, Bytes, Schema, String

from mirrorline.clients import compiled_codecs, process_patches
from mirrorline.clients.compiled_codecs import HOT_MESSAGES, compile_decoder, compile_encoder

_RANGES = {types.Int8: 8, types.Int16: 16, types.Int32: 32, types.Int64: 64}


def _value(field, rng: random.Random, depth: int = 0):
    """A random value for ``field``, as aiokafka's decode would return it."""
    if field in _RANGES:
        bits = _RANGES[field]
        return rng.choice([-(2 ** (bits - 1)), 2 ** (bits - 1) - 1, -1, 0, rng.randrange(-(2 ** (bits - 1)),
                                                                                           2 ** (bits - 1))])
    if field is types.UInt32:
        return rng.choice([0, 2 ** 32 - 1, rng.randrange(2 ** 32)])
    if field is types.Float64:
        return rng.choice([0.0, -1.5, rng.random() * 1e6])
    if field is types.Boolean:
        return rng.choice([True, False])
    if isinstance(field, String):
        return rng.choice([None, "", "topic-é", "mirror." + "x" * rng.randrange(40)])
    if field is Bytes:
        return rng.choice([None, b"", bytes(rng.randrange(256) for _ in range(rng.randrange(64)))])
    if isinstance(field, Schema):
        return tuple(_value(inner, rng, depth) for inner in field.fields)
    if isinstance(field, Array):
        if rng.random() < 0.1:
            return None
        return [_value(field.array_of, rng, depth + 1) for _ in range(rng.randrange(4 if depth < 2 else 2))]
    raise AssertionError(f"no generator for {field!r}")


def _messages(cls: type[Struct], count: int = 60):
    rng = random.Random(cls.__name__)
    return [tuple(_value(field, rng) for field in cls.SCHEMA.fields) for _ in range(count)]


@pytest.mark.parametrize("cls", HOT_MESSAGES, ids=lambda cls: cls.__name__)
def test_compiled_functions_match_aiokafkas_schema_walk(cls):
    encode, decode = compile_encoder(cls.SCHEMA), compile_decoder(cls.SCHEMA)
    for values in _messages(cls):
        expected = cls.SCHEMA.encode(values)
        assert encode(values) == expected
        decoded, end = decode(expected, 0)
        assert decoded == cls.SCHEMA.decode(io.BytesIO(expected))
        assert end == len(expected)
        # from the middle of a frame, as after a response header
        assert decode(b"\x00" * 7 + expected + b"tail", 7) == (decoded, 7 + len(expected))


@pytest.mark.parametrize("cls", HOT_MESSAGES, ids=lambda cls: cls.__name__)
def test_installed_codecs_match_aiokafkas_own(cls):
    process_patches.install()
    assert compiled_codecs.is_installed(cls)
    for values in _messages(cls, 20):
        frame = cls.SCHEMA.encode(values)
        if compiled_codecs._is_request(cls):
            message = cls.__new__(cls)
            Struct.__init__(message, *values)
            assert message.encode() == frame
        else:
            buffer = io.BytesIO(b"head" + frame)
            buffer.read(4)
            decoded = cls.decode(buffer)
            assert buffer.tell() == 4 + len(frame)
            assert type(decoded) is cls
            assert decoded == Struct.decode.__func__(cls, io.BytesIO(frame))
            assert cls.decode(frame) == decoded


@pytest.mark.parametrize("cls", [FetchResponse_v11, ProduceResponse_v8, FetchRequest_v11, ProduceRequest_v8],
                         ids=lambda cls: cls.__name__)
def test_a_truncated_frame_fails_as_in_aiokafka(cls):
    decode = compile_decoder(cls.SCHEMA)
    for values in _messages(cls, 10):
        frame = cls.SCHEMA.encode(values)
        for cut in range(len(frame)):
            with pytest.raises(ValueError):
                cls.SCHEMA.decode(io.BytesIO(frame[:cut]))
            with pytest.raises(ValueError):
                decode(frame[:cut], 0)


def test_a_value_that_does_not_fit_its_field_fails_as_in_aiokafka():
    schema = Schema(("a", types.Int16), ("b", Array(("c", types.Int32), ("d", String("utf-8")))))
    encode = compile_encoder(schema)
    for values in [(2 ** 15, []), (1, [(2 ** 31, "x")]), (None, []), (1, [(1,)]), (1, [(1, "s" * 2 ** 15)])]:
        with pytest.raises(ValueError):
            schema.encode(values)
        with pytest.raises(ValueError):
            encode(values)
    with pytest.raises(ValueError, match="field count"):
        encode((1,))


def test_a_flexible_field_type_is_refused_and_its_class_left_alone():
    flexible = Schema(("name", types.CompactString("utf-8")), ("tags", types.TaggedFields))
    with pytest.raises(TypeError, match="no compiled codec"):
        compile_decoder(flexible)
    with pytest.raises(TypeError, match="no compiled codec"):
        compile_encoder(flexible)

    class FlexibleResponse(Struct):
        SCHEMA = flexible

    assert compiled_codecs.install([FlexibleResponse]) == []
    assert not compiled_codecs.is_installed(FlexibleResponse)


def test_install_is_idempotent_and_leaves_a_class_with_its_own_codec_alone():
    class OwnDecode(Struct):
        SCHEMA = Schema(("a", types.Int32))

        @classmethod
        def decode(cls, data):
            return "own"

    process_patches.install()
    assert compiled_codecs.install() == []  # everything compiled already
    assert compiled_codecs.install([OwnDecode]) == []
    assert OwnDecode.decode(b"\0\0\0\1") == "own"


def test_every_field_width_packs_in_one_call():
    schema = Schema(("a", types.Int8), ("b", types.Int16), ("c", types.Int32), ("d", types.Int64), ("e", types.UInt32), ("f", types.Float64),
                    ("g", types.Boolean))
    values = (-1, 2, -3, 4, 5, 6.5, True)
    frame = struct.pack(">bhiqId?", *values)
    assert compile_encoder(schema)(values) == frame == schema.encode(values)
    assert compile_decoder(schema)(frame, 0) == (values, len(frame))
