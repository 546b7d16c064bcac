"""Converters against real Kafka: the bytes written are exactly what Connect's converters write.

A FileStreamSource (whose values are strings once a value converter other than ByteArray is
set, as Connect's FileStreamSourceTask with its STRING schema) writes through ``JsonConverter``
with and without schemas, and through ``StringConverter``; a MirrorSource takes the worker's
converters with their worker-level settings, and a connector's own converter overrides them.
The REST API lists the converters and validates converter settings on their fields.
"""

from __future__ import annotations

import base64

import pytest

from support.kafka import produce, read_all
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

JSON = "org.apache.kafka.connect.json.JsonConverter"
STRING = "org.apache.kafka.connect.storage.StringConverter"
LINES = ["first line", "zweite Zeile é", "{\"not\": \"parsed\"}"]


def file_source(path, topic: str, **converters: str) -> dict[str, str]:
    return {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "file": str(path),
            "topic": topic, **converters}


async def test_file_source_writes_connects_json_and_string_bytes(cluster_a, make_topic, unique_name, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    topics = {kind: await make_topic(cluster_a, prefix=f"conv{kind}") for kind in ("envelope", "plain", "string")}
    connectors = [
        {"name": unique_name("envelope"), **file_source(source, topics["envelope"], **{"value.converter": JSON,
                                                                                       "key.converter": STRING})},
        {"name": unique_name("plain"), **file_source(source, topics["plain"], **{
            "value.converter": JSON, "value.converter.schemas.enable": "false"})},
        {"name": unique_name("string"), **file_source(source, topics["string"], **{"value.converter": STRING})},
    ]
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers}
    async with running_standalone(worker, connectors):
        got = {kind: (await read_all(cluster_a.bootstrap_servers, topic, expect=len(LINES), timeout=30))[0]
               for kind, topic in topics.items()}
    # Connect's JsonConverter on FileStreamSourceTask's records (Schema.STRING_SCHEMA, a String value)
    assert [r.value for r in got["envelope"]] == [
        ('{"schema":{"type":"string","optional":false},"payload":%s}' % payload).encode()
        for payload in ('"first line"', '"zweite Zeile é"', '"{\\"not\\": \\"parsed\\"}"')]
    assert all(r.key is None for r in got["envelope"])  # a null key stays null through StringConverter
    assert [r.value for r in got["plain"]] == [b'"first line"', '"zweite Zeile é"'.encode(),
                                               b'"{\\"not\\": \\"parsed\\"}"']
    assert [r.value for r in got["string"]] == [line.encode() for line in LINES]


async def test_worker_converters_apply_unless_the_connector_names_its_own(cluster_a, cluster_b, make_topic,
                                                                         flow_config, unique_name):
    topic = await make_topic(cluster_a, prefix="convmirror")
    sent = [(0, b"k%d" % i, b"\x00\xffvalue %d" % i, [("h", b"\x01raw")], None) for i in range(5)]
    await produce(cluster_a.bootstrap_servers, topic, sent)
    inherits, overrides = unique_name("inherits"), unique_name("overrides")
    base = {**flow_config(topics=topic, tasks_max=1), "heartbeats.replication.enabled": "false"}
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers, "value.converter": JSON,
              "value.converter.schemas.enable": "false",
              "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter"}
    connectors = [
        {"name": inherits, **base},
        # the second flow writes to AA.<topic>, and keeps its values as bytes
        {"name": overrides, **flow_config(topics=topic, tasks_max=1, source_alias="AA"),
         "heartbeats.replication.enabled": "false", "value.converter": "ByteArrayConverter"},
    ]
    async with running_standalone(worker, connectors) as url, Rest(url) as rest:
        for name in (inherits, overrides):
            await rest.wait_for(f"/connectors/{name}/status", all_running(1), timeout=60)
        converted = (await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=len(sent), timeout=60))[0]
        kept = (await read_all(cluster_b.bootstrap_servers, f"AA.{topic}", expect=len(sent), timeout=60))[0]
    # Connect's JsonConverter, schemas off, on a byte[] value: a JSON string of its base64
    assert [r.value for r in converted] == [b'"%s"' % base64.b64encode(v) for _, _, v, _, _ in sent]
    assert [r.key for r in converted] == [k for _, k, _, _, _ in sent]  # the worker's key converter: ByteArray
    assert [list(r.headers) for r in converted] == [[("h", b"\x01raw")]] * len(sent)  # byte headers unchanged
    assert [r.value for r in kept] == [v for _, _, v, _, _ in sent]


async def test_rest_lists_converters_and_validates_their_settings_on_their_fields(cluster_a):
    async with running_standalone({"bootstrap.servers": cluster_a.bootstrap_servers}) as url, Rest(url) as rest:
        code, plugins = await rest.call("GET", "/connector-plugins?connectorsOnly=false")
        assert code == 200
        kinds = {}
        for plugin in plugins:
            kinds.setdefault(plugin["class"], set()).add(plugin["type"])
        assert kinds["mirrorline.converters.json_converter.JsonConverter"] == {"converter", "header_converter"}
        assert kinds["mirrorline.converters.bytearray.ByteArrayConverter"] == {"converter", "header_converter"}
        assert kinds["mirrorline.converters.simple_header.SimpleHeaderConverter"] == {"header_converter"}
        code, settings = await rest.call("GET", f"/connector-plugins/{JSON}/config")
        assert code == 200 and "schemas.enable" in {s["name"] for s in settings}

        config = {"connector.class": "FileStreamSource", "name": "v", "file": "/tmp/x", "topic": "t",
                  "key.converter": "com.example.NoSuchConverter", "value.converter": STRING,
                  "value.converter.converter.encoding": "no-such-charset", "header.converter": JSON,
                  "errors.tolerance": "sometimes", "errors.retry.timeout": "-5"}
        code, body = await rest.call("PUT", "/connector-plugins/FileStreamSource/config/validate", config)
        assert code == 200
        errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
        assert errors["key.converter"] == ["Class com.example.NoSuchConverter could not be found: no installed "
                                           "converter is named so"]
        assert "converter.encoding" in errors["value.converter"][0]
        assert errors["header.converter"] == []
        assert errors["errors.tolerance"] == ["Invalid value sometimes for configuration errors.tolerance: must be "
                                              "one of none, all"]
        assert errors["errors.retry.timeout"]
        assert body["error_count"] == 4
        code, body = await rest.call("POST", "/connectors", {"name": "v", "config": config})
        assert code == 400 and "key.converter" in body["message"]
