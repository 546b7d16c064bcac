"""Converters without Kafka: Connect's bytes, round trips, nulls, header values, config resolution."""

from __future__ import annotations

import datetime
import decimal

import pytest

from mirrorline.api.converters import infer_schema
from mirrorline.api.errors import BadRequestError, ConfigError, DataError, NotFoundError
from mirrorline.api.records import SinkRecord, SourceRecord
from mirrorline.converters.bytearray import ByteArrayConverter
from mirrorline.converters.json_converter import ENVELOPE_ERROR, JsonConverter
from mirrorline.converters.simple_header import SimpleHeaderConverter
from mirrorline.converters.string import StringConverter
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.abstract_herder import validate_or_raise
from mirrorline.runtime.converters import build_converters, source_converters, validate_converters
from mirrorline.runtime.error_handling import Stage, StageError

# What Connect's JsonConverter writes for a struct (the Confluent docs' ksql "users" example).
CONNECT_STRUCT = (b'{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"registertime"},'
                  b'{"type":"string","optional":false,"field":"userid"},{"type":"string","optional":false,'
                  b'"field":"regionid"},{"type":"string","optional":false,"field":"gender"}],"optional":false,'
                  b'"name":"ksql.users"},"payload":{"registertime":1493819497170,"userid":"User_1",'
                  b'"regionid":"Region_5","gender":"MALE"}}')


@pytest.fixture(scope="module")
def plugins() -> PluginRegistry:
    return PluginRegistry.discover()


def json_converter(**settings) -> JsonConverter:
    converter = JsonConverter()
    converter.configure(JsonConverter.config_def.parse(settings), False)
    return converter


# -- JsonConverter ------------------------------------------------------------------------------

def test_json_reads_and_writes_connects_envelope_byte_for_byte():
    converter = json_converter()
    schema, value = converter.to_data("users", CONNECT_STRUCT)
    assert value == {"registertime": 1493819497170, "userid": "User_1", "regionid": "Region_5", "gender": "MALE"}
    assert schema["name"] == "ksql.users" and [f["field"] for f in schema["fields"]][:2] == ["registertime", "userid"]
    assert converter.from_data("users", schema, value) == CONNECT_STRUCT


def test_json_primitive_envelopes_are_connects():
    converter = json_converter()
    assert converter.from_data("t", {"type": "string"}, "foo") == b'{"schema":{"type":"string","optional":false},' \
                                                                  b'"payload":"foo"}'
    assert converter.from_data("t", {"optional": True, "type": "int32"}, None) == \
        b'{"schema":{"type":"int32","optional":true},"payload":null}'
    assert converter.from_data("t", {"type": "bytes"}, b"\x00\x01") == \
        b'{"schema":{"type":"bytes","optional":false},"payload":"AAE="}'


def test_json_without_schemas_writes_and_reads_the_payload_alone():
    converter = json_converter(**{"schemas.enable": "false"})
    assert converter.from_data("t", None, {"a": 1, "b": [True, None], "é": "ü"}) == \
        '{"a":1,"b":[true,null],"é":"ü"}'.encode()
    assert converter.to_data("t", b'{"a": 1.5, "b": "x"}') == (None, {"a": 1.5, "b": "x"})
    assert converter.to_data("t", b"42") == (None, 42)


def test_json_nulls():
    converter = json_converter()
    assert converter.from_data("t", None, None) is None  # a tombstone stays a tombstone
    assert converter.to_data("t", None) == (None, None)
    with pytest.raises(DataError, match="null value for field that is required"):
        converter.from_data("t", {"type": "string"}, None)
    with pytest.raises(DataError, match="Invalid null value for required STRING field"):
        converter.to_data("t", b'{"schema":{"type":"string","optional":false},"payload":null}')
    assert converter.to_data("t", b'{"schema":{"type":"string","optional":false,"default":"d"},"payload":null}')[1] \
        == "d"


def test_json_with_schemas_refuses_plain_json_with_connects_message():
    with pytest.raises(DataError) as failure:
        json_converter().to_data("t", b'{"a": 1}')
    assert str(failure.value) == ENVELOPE_ERROR
    with pytest.raises(DataError, match="serialization error"):
        json_converter().to_data("t", b"not json")


def test_json_schema_and_data_must_agree():
    converter = json_converter()
    with pytest.raises(DataError, match="Invalid type for INT8"):
        converter.from_data("t", {"type": "int8"}, 300)
    with pytest.raises(DataError, match="Field b"):
        converter.from_data("t", {"type": "struct", "fields": [{"field": "b", "type": "boolean"}]}, {"b": "yes"})
    with pytest.raises(DataError, match="Schema must contain 'type' field"):
        converter.to_data("t", b'{"schema":{"optional":false},"payload":1}')


def test_json_infers_a_schema_for_data_without_one_beyond_connect():
    converter = json_converter()
    assert converter.from_data("t", None, {"id": 7, "name": "x", "tags": ["a"], "gone": None}) == (
        b'{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},'
        b'{"type":"string","optional":false,"field":"name"},{"type":"array","items":{"type":"string",'
        b'"optional":false},"optional":false,"field":"tags"},{"type":"string","optional":true,"field":"gone"}],'
        b'"optional":false},"payload":{"id":7,"name":"x","tags":["a"],"gone":null}}')
    connect_like = json_converter(**{"schemas.infer.enable": "false"})
    assert connect_like.from_data("t", None, {"id": 7}) == b'{"schema":null,"payload":{"id":7}}'
    assert connect_like.to_data("t", b'{"schema":null,"payload":{"id":7}}') == (None, {"id": 7})


def test_json_logical_types_round_trip():
    converter = json_converter()
    decimal_schema = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                      "parameters": {"scale": "2"}}
    data = converter.from_data("t", decimal_schema, decimal.Decimal("1.23"))
    assert data == (b'{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal",'
                    b'"version":1,"parameters":{"scale":"2"}},"payload":"ew=="}')
    assert converter.to_data("t", data)[1] == decimal.Decimal("1.23")
    ts_schema = {"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1}
    when = datetime.datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=datetime.timezone.utc)
    data = converter.from_data("t", ts_schema, when)
    assert b'"payload":1714564800250}' in data
    assert converter.to_data("t", data)[1] == when
    date_schema = {"type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1}
    assert converter.to_data("t", converter.from_data("t", date_schema, datetime.date(1970, 1, 11)))[1] == \
        datetime.date(1970, 1, 11)


def test_json_maps_with_non_string_keys_are_arrays_of_pairs():
    converter = json_converter()
    schema = {"type": "map", "keys": {"type": "int32"}, "values": {"type": "string"}}
    data = converter.from_data("t", schema, {1: "a", 2: "b"})
    assert data == b'{"schema":{"type":"map","keys":{"type":"int32","optional":false},"values":{"type":"string",' \
                   b'"optional":false},"optional":false},"payload":[[1,"a"],[2,"b"]]}'
    assert converter.to_data("t", data)[1] == {1: "a", 2: "b"}


# -- String, ByteArray, headers -----------------------------------------------------------------

def test_string_converter_encodes_and_decodes_in_its_encoding():
    converter = StringConverter()
    converter.configure(StringConverter.config_def.parse({"converter.encoding": "ISO-8859-1"}), False)
    assert converter.from_data("t", None, "café") == b"caf\xe9"
    assert converter.to_data("t", b"caf\xe9") == ({"type": "string", "optional": True}, "café")
    assert converter.from_data("t", None, None) is None
    assert converter.from_data("t", None, True) == b"true"
    assert converter.from_data("t", None, b"\xff raw") == b"\xff raw"  # bytes pass through (beyond Connect)
    with pytest.raises(ConfigError, match="unknown encoding"):
        StringConverter.config_def.parse({"converter.encoding": "no-such-charset"})


def test_byte_array_converter_only_takes_bytes():
    converter = ByteArrayConverter()
    assert converter.from_data("t", None, b"x") == b"x"
    assert converter.to_data("t", b"x") == ({"type": "bytes", "optional": True}, b"x")
    with pytest.raises(DataError, match="not compatible with objects of type str"):
        converter.from_data("t", None, "x")
    with pytest.raises(DataError, match="Invalid schema type for ByteArrayConverter: STRING"):
        converter.from_data("t", {"type": "string"}, b"x")


@pytest.mark.parametrize("text, type_, value", [
    ("true", "boolean", True), ("FALSE", "boolean", False), ("42", "int8", 42), ("300", "int16", 300),
    ("70000", "int32", 70000), ("5000000000", "int64", 5000000000), ("1.5", "float64", 1.5),
    ("hello world", "string", "hello world"), ("", "string", ""), ("[1,2]", "array", [1, 2]),
    ('{"a":1}', "map", {"a": 1}), ("[not json", "string", "[not json"),
])
def test_simple_header_converter_parses_values_as_connect(text, type_, value):
    schema, parsed = SimpleHeaderConverter().to_connect_header("t", "h", text.encode())
    assert (schema["type"], parsed) == (type_, value)


def test_simple_header_converter_writes_text():
    converter = SimpleHeaderConverter()
    assert converter.from_connect_header("t", "h", None, "x") == b"x"
    assert converter.from_connect_header("t", "h", None, False) == b"false"
    assert converter.from_connect_header("t", "h", None, 12) == b"12"
    assert converter.from_connect_header("t", "h", None, [1, "a"]) == b'[1,"a"]'
    assert converter.from_connect_header("t", "h", None, None) is None
    assert converter.to_connect_header("t", "h", None) == (None, None)


def test_infer_schema():
    assert infer_schema(None) is None
    assert infer_schema(True) == {"type": "boolean", "optional": False}
    assert infer_schema([1, "a"]) is None  # mixed: no single schema
    assert infer_schema([1, None]) == {"type": "array", "items": {"type": "int64", "optional": True},
                                       "optional": False}
    assert infer_schema(2 ** 70) is None


# -- RecordConverters: resolution, precedence, pass-through -------------------------------------

def test_defaults_are_pass_through_and_the_mirror_path_gets_none(plugins):
    assert build_converters({}, {}, plugins).is_passthrough
    assert source_converters({}, {}, plugins) is None
    assert source_converters({"value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"},
                             {}, plugins) is None
    assert source_converters({"value.converter": "StringConverter"}, {}, plugins) is not None


def test_connector_overrides_worker_and_settings_come_with_the_class(plugins):
    worker = {"value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false", "key.converter": "StringConverter"}
    record = SourceRecord(None, None, "t", key="k", value={"a": 1})
    inherited = build_converters({}, worker, plugins)
    assert inherited.to_bytes(record).value == b'{"a":1}' and inherited.to_bytes(record).key == b"k"
    # the connector names its own JsonConverter: the worker's value.converter.* no longer apply
    own = build_converters({"value.converter": "JsonConverter"}, worker, plugins)
    assert own.to_bytes(record).value.startswith(b'{"schema":{"type":"struct"')
    tuned = build_converters({"value.converter": "JsonConverter", "value.converter.schemas.enable": "false",
                              "key.converter": "StringConverter"},
                             {}, plugins)
    assert tuned.to_bytes(record).value == b'{"a":1}'


def test_to_bytes_and_to_data_round_trip_records_with_headers(plugins):
    converters = build_converters({"key.converter": "StringConverter", "value.converter": "JsonConverter",
                                   "header.converter": "SimpleHeaderConverter"}, {}, plugins)
    written = converters.to_bytes(SourceRecord({"p": 0}, {"o": 1}, "t", key="k", value="v",
                                               value_schema={"type": "string"},
                                               headers=[("raw", b"\x00"), ("n", 7), ("none", None)]))
    assert written.value == b'{"schema":{"type":"string","optional":false},"payload":"v"}'
    assert written.headers == [("raw", b"\x00"), ("n", b"7"), ("none", None)]
    read = converters.to_data(SinkRecord("t", 0, 5, key=written.key, value=written.value,
                                         headers=[("n", b"7"), ("flag", b"true")]))
    assert (read.key, read.value, read.headers) == ("k", "v", [("n", 7), ("flag", True)])
    assert read.value_schema == {"type": "string", "optional": False}
    assert read.key_schema == {"type": "string", "optional": True}


def test_a_converter_failure_names_its_stage_and_class(plugins):
    converters = build_converters({"value.converter": "JsonConverter"}, {}, plugins)
    with pytest.raises(StageError) as failure:
        converters.to_data(SinkRecord("t", 0, 5, value=b"not json"))
    assert failure.value.stage is Stage.VALUE_CONVERTER
    assert failure.value.executing_class == "mirrorline.converters.json_converter.JsonConverter"
    assert isinstance(failure.value.__cause__, DataError)


def test_unknown_converter_and_bad_settings_are_reported_on_their_fields(plugins):
    with pytest.raises(NotFoundError):
        build_converters({"key.converter": "com.example.Nope"}, {}, plugins)
    values = {v.name: v.errors for v in validate_converters(
        {"key.converter": "com.example.Nope", "value.converter": "StringConverter",
         "value.converter.converter.encoding": "bogus", "header.converter": "SimpleHeaderConverter"}, plugins)}
    assert "no installed converter is named so" in values["key.converter"][0]
    assert "converter.encoding" in values["value.converter"][0]
    assert values["header.converter"] == []
    with pytest.raises(BadRequestError) as failure:
        validate_or_raise(plugins, {"name": "c", "connector.class": "MirrorSourceConnector",
                                    "value.converter": "com.example.Nope", "errors.tolerance": "some"})
    assert "value.converter: Class com.example.Nope could not be found" in str(failure.value)
    assert "errors.tolerance" in str(failure.value)


def test_converters_answer_to_connects_java_names(plugins):
    for java, cls in (("org.apache.kafka.connect.converters.ByteArrayConverter", ByteArrayConverter),
                      ("org.apache.kafka.connect.storage.StringConverter", StringConverter),
                      ("org.apache.kafka.connect.json.JsonConverter", JsonConverter)):
        assert plugins.converters.resolve(java) is cls
        assert plugins.header_converters.resolve(java) is cls
    assert plugins.header_converters.resolve("org.apache.kafka.connect.storage.SimpleHeaderConverter") \
        is SimpleHeaderConverter
    with pytest.raises(NotFoundError):
        plugins.converters.resolve("SimpleHeaderConverter")  # a header converter only
