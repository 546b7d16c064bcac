"""Mirroring topic-selection controls without Kafka: store records, validation, REST routes, CLI checks."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mirrorline.api import ClusterState, NotFoundError
from mirrorline.cli import main as cli
from mirrorline.rest import create_app

from mirrorline.connectors.source_mirror.topic_selection import (SelectionAccessDenied, SelectionKey, StoredSelection,
                                                     check_includes)
from mirrorline.connectors.source_mirror import rest_admin
from mirrorline.connectors.source_mirror.config_topic import TaskConfigReader
from mirrorline.connectors.source_mirror.rest_admin import MirroringRestExtension
from mirrorline.connectors.source_mirror.selection_admin import MirrorTarget, parse_selection_request
from mirrorline.connectors.source_mirror.topics import assigned_topics, topic_filter_for
from test_rest_api import FakeHerder  # same folder: on sys.path under pytest


def mirror_config(source: str = "A", **extra: str) -> dict[str, str]:
    return {"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "source.cluster.alias": source, "target.cluster.alias": "B",
            "source.cluster.bootstrap.servers": "a:9092", "target.cluster.bootstrap.servers": "b:9092", **extra}


# -- store records and validation --------------------------------------------------------------

def test_key_and_value_round_trip_as_compact_json():
    key = SelectionKey("mirror", "A", "B")
    assert key.encode() == b'{"connector":"mirror","source":"A","target":"B"}'
    assert SelectionKey.decode(b'{"target":"B","source":"A","connector":"mirror"}') == key
    value = StoredSelection(("a.*", ""), 1700000000000)
    assert json.loads(value.encode()) == {"includes": ["a.*", ""], "updated": 1700000000000}
    assert StoredSelection.decode(value.encode()) == value
    assert StoredSelection.decode(None) is None  # tombstone: back to the configured topics
    for bad in (b"[]", b'{"connector": 1}', b"nope"):
        with pytest.raises(ValueError):
            SelectionKey.decode(bad)
    with pytest.raises(ValueError):
        StoredSelection.decode(b'{"includes": ["("]}')


@pytest.mark.parametrize("value, words", [
    ("a.*", "must be an array of regular expressions, not a string"),
    (["a", 3], "'includes'[1] must be a string"),
    (["ok", "orders-("], "'orders-('"),
    (["a", "(?i)b"], "global flags"),
])
def test_includes_are_validated_naming_the_offending_pattern(value, words):
    with pytest.raises(ValueError, match=None) as info:
        check_includes(value)
    assert words in str(info.value)


def test_includes_use_the_topics_dialect_full_match_and_keep_the_excludes():
    config = {"topics": "t1", "topics.exclude": "secret.*"}
    topic_filter = topic_filter_for(config, ["t.*", "^other$", "secret-x"])
    assert [t for t in ("t1", "t2", "xt2", "other", "secret-x") if topic_filter.should_replicate_topic(t)] == \
        ["t1", "t2", "other"]
    assert not any(topic_filter_for(config, [""]).should_replicate_topic(t) for t in ("t1", "x", "a.b"))
    assert not topic_filter_for(config, []).should_replicate_topic("t1")
    assert topic_filter_for(config, None).should_replicate_topic("t1")  # none stored: configured topics
    assert not topic_filter_for(config, None).should_replicate_topic("t2")


@pytest.mark.parametrize("body, words", [
    ([], "must be a JSON object"),
    ({"include": ["a"]}, "unknown field(s) 'include'"),
    ({}, "must have 'includes'"),
    ({"includes": ["["]}, "Invalid regular expression in 'includes': '['"),
])
def test_request_body_shape_is_checked(body, words):
    with pytest.raises(Exception) as info:
        parse_selection_request(body)
    assert words in str(info.value) and getattr(info.value, "http_status", None) == 400


def test_active_topics_come_from_assigned_partitions():
    configs = [{"task.assigned.partitions": "orders-0,my-topic-2,orders-1"}, {"task.assigned.partitions": ""}, {}]
    assert assigned_topics(configs) == ["my-topic", "orders"]


def test_mirror_target_settings_take_the_declared_defaults():
    target = MirrorTarget("m", {"connector.class": "MirrorSource", "source.cluster.alias": "A"})
    assert target.key == SelectionKey("m", "A", "target")
    assert target.configured_includes == [".*"]
    assert target.setting("replication.factor") == 2
    assert MirrorTarget("m", mirror_config(topics="a, b")).configured_includes == ["a", "b"]


def test_config_topic_reader_keeps_the_last_complete_commit():
    def record(key: str, value: Any) -> SimpleNamespace:
        return SimpleNamespace(key=key.encode(), value=None if value is None else json.dumps(value).encode())

    reader = TaskConfigReader("m")
    for key, value in [("task-m-0", {"properties": {"task.assigned.partitions": "a-0"}}),
                       ("task-m-x-0", {"properties": {"task.assigned.partitions": "zz-0"}}),  # connector m-x
                       ("commit-m", {"tasks": 1}),
                       ("task-m-0", {"properties": {"task.assigned.partitions": "b-0"}})]:  # not committed yet
        reader.on_record(record(key, value))
    assert reader.task_configs == [{"task.assigned.partitions": "a-0"}]
    reader.on_record(record("commit-m", {"tasks": 2}))  # task 1 missing: inconsistent, read as none
    assert reader.task_configs == []
    reader.on_record(record("task-m-0", {"properties": {"task.assigned.partitions": "c-0"}}))
    reader.on_record(record("commit-m", {"tasks": 1}))
    assert reader.task_configs == [{"task.assigned.partitions": "c-0"}]
    reader.on_record(record("connector-m", None))
    assert reader.task_configs == []


# -- REST routes (the selection store replaced by a dict) --------------------------------------

class MirrorHerder(FakeHerder):
    """FakeHerder whose task configs carry assigned partitions."""

    def __init__(self) -> None:
        super().__init__()
        self.assigned: dict[str, list[str]] = {}

    async def task_configs(self, name: str) -> list[dict[str, Any]]:
        self._get(name)
        return [{"id": {"connector": name, "task": i}, "config": {"task.assigned.partitions": text}}
                for i, text in enumerate(self.assigned.get(name, []))]


@pytest.fixture
def store(monkeypatch):
    """The stored selections by connector name (what the routes read and write)."""
    stored: dict[str, list[str]] = {}

    async def read(target: MirrorTarget) -> list[str]:
        return stored.get(target.name, target.configured_includes)

    async def write(target: MirrorTarget, includes: list[str] | None) -> list[str]:
        if includes is None:
            stored.pop(target.name, None)
            return target.configured_includes
        stored[target.name] = includes
        return includes

    monkeypatch.setattr(rest_admin, "read_selection", read)
    monkeypatch.setattr(rest_admin, "write_selection", write)
    return stored


@pytest.fixture
async def herder():
    herder = MirrorHerder()
    await herder.put_connector_config("ab", mirror_config(topics="t1"), allow_replace=False)
    await herder.put_connector_config("seq", {"connector.class": "SequenceSource"}, allow_replace=False)
    herder.assigned["ab"] = ["t1-0,t1-1", "t1-2"]
    return herder


@pytest.fixture
async def client(herder):
    test_client = TestClient(TestServer(create_app(herder, rest_extensions=[MirroringRestExtension])))
    await test_client.start_server()
    yield test_client
    await test_client.close()


async def call(client, method: str, path: str, **kwargs) -> tuple[int, Any]:
    resp = await client.request(method, path, **kwargs)
    text = await resp.text()
    return resp.status, json.loads(text) if text else None


async def test_get_set_and_reset_the_selection(client, store):
    assert await call(client, "GET", "/admin/mirroring/topic-selection") == (200, {"includes": ["t1"]})
    assert await call(client, "POST", "/admin/mirroring/topic-selection", json={"includes": ["t2", "x.*"]}) == \
        (200, {"includes": ["t2", "x.*"]})
    assert store == {"ab": ["t2", "x.*"]}
    assert await call(client, "GET", "/admin/mirroring/topic-selection?connector=ab") == \
        (200, {"includes": ["t2", "x.*"]})
    assert await call(client, "POST", "/admin/mirroring/topic-selection", json={"includes": [""]}) == \
        (200, {"includes": [""]})
    assert await call(client, "DELETE", "/admin/mirroring/topic-selection") == (200, {"includes": ["t1"]})
    assert store == {}


async def test_active_topics_are_those_of_the_task_configs(client, store):
    assert await call(client, "GET", "/admin/mirroring/active-topics") == (200, {"active_topics": ["t1"]})


async def test_bad_requests(client, store):
    status, body = await call(client, "POST", "/admin/mirroring/topic-selection", json={"includes": ["ok", "("]})
    assert status == 400 and "'('" in body["message"] and body["error_code"] == 400
    status, body = await call(client, "POST", "/admin/mirroring/topic-selection", data="includes=a")
    assert status == 400 and "not valid JSON" in body["message"]
    status, body = await call(client, "POST", "/admin/mirroring/topic-selection", json=["a"])
    assert status == 400 and "must be a JSON object" in body["message"]
    status, body = await call(client, "GET", "/admin/mirroring/topic-selection?connector=seq")
    assert status == 400 and "not a MirrorSource connector" in body["message"]
    status, body = await call(client, "GET", "/admin/mirroring/active-topics?connector=nope")
    assert status == 404 and "nope" in body["message"]
    assert store == {}


async def test_several_connectors_answer_per_connector(client, herder, store):
    await herder.put_connector_config("cb", mirror_config("C", topics="t1"), allow_replace=False)
    herder.assigned["cb"] = ["u-0"]
    assert await call(client, "GET", "/admin/mirroring/topic-selection") == (200, {
        "includes": ["t1"], "connectors": {"ab": {"includes": ["t1"]}, "cb": {"includes": ["t1"]}}})
    await call(client, "POST", "/admin/mirroring/topic-selection?connector=cb", json={"includes": ["u"]})
    assert await call(client, "GET", "/admin/mirroring/topic-selection") == (200, {
        "connectors": {"ab": {"includes": ["t1"]}, "cb": {"includes": ["u"]}}})  # they differ: no common list
    assert await call(client, "GET", "/admin/mirroring/active-topics") == (200, {
        "active_topics": ["t1", "u"], "connectors": {"ab": {"active_topics": ["t1"]},
                                                      "cb": {"active_topics": ["u"]}}})


async def test_no_mirror_source_connector_is_a_404(store):
    test_client = TestClient(TestServer(create_app(FakeHerder(), rest_extensions=[MirroringRestExtension])))
    await test_client.start_server()
    try:
        status, body = await call(test_client, "GET", "/admin/mirroring/active-topics")
        assert status == 404 and "no MirrorSource connector" in body["message"]
    finally:
        await test_client.close()


async def test_cluster_state_errors_pass_through():
    class Empty(ClusterState):
        worker_id = None

        async def connectors(self):
            return ["gone"]

        async def connector_config(self, name):
            raise NotFoundError(f"Connector {name} not found")

        async def task_configs(self, name):
            return []

        async def connector_status(self, name):
            return {}

    with pytest.raises(NotFoundError, match="no MirrorSource connector"):
        await rest_admin.mirror_targets(Empty(), None)  # deleted meanwhile: skipped


# -- CLI: argument errors are one line ---------------------------------------------------------

@pytest.mark.parametrize("argv, words", [
    (["topic-selection", "get"], "say where"),
    (["topic-selection", "set", "--url", "http://x", "--includes", "("], "Invalid regular expression"),
    (["active-topics", "mm2.properties", "--url", "http://x"], "not both"),
    (["topic-selection", "get", "{props}", "--flow", "A-B"], "SOURCE->TARGET"),
    (["topic-selection", "get", "{props}", "--flow", "A->C"], "unknown cluster alias(es) C"),
    (["active-topics", "{props}", "--flow", "A->B", "--connector", "x"], "go with --url"),
])
def test_cli_argument_errors(argv, words, tmp_path, capsys):
    props = tmp_path / "mm2.properties"
    props.write_text("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n")
    argv = [str(props) if a == "{props}" else a for a in argv]
    assert cli.main(["mirroring", *argv]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mirrorline: error: ") and words in err[0], err


# -- store failures keep their meaning in REST answers -------------------------------------------

@pytest.mark.parametrize("error, status, words", [
    (SelectionAccessDenied("not authorized"), 403, "Connector m: not authorized"),
    (ConnectionError("cannot connect to the target cluster"), 503, "cannot read the topic selection on target "
                                                                    "cluster B (b:9092): cannot connect"),
    (TimeoutError(), 503, "no answer within"),
])
async def test_store_failures_name_the_connector_and_cluster(monkeypatch, error, status, words):
    from mirrorline.connectors.source_mirror import selection_admin

    class FailingStore:
        async def __aenter__(self):
            return self

        async def __aexit__(self, *exc):
            return None

        async def read(self, key):
            raise error

    monkeypatch.setattr(selection_admin.MirrorTarget, "store", lambda self: FailingStore())
    with pytest.raises(Exception) as info:
        await selection_admin.read_selection(MirrorTarget("m", mirror_config()))
    assert info.value.http_status == status and words in str(info.value), str(info.value)


# -- the connector applies what is stored ---------------------------------------------------------

async def test_connector_applies_the_stored_selection_and_falls_back_to_topics(caplog):
    from mirrorline.connectors.mirror_client.policies import DefaultReplicationPolicy
    from mirrorline.connectors.source_mirror import connector as connector_module
    from mirrorline.connectors.source_mirror.topics import TopicSelection

    answers: list[Any] = []

    class Store:
        async def read(self, key):
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    mirror = connector_module.MirrorSourceConnector()
    mirror.context = SimpleNamespace(name="m", report_warning=lambda message: None)
    mirror._originals = {"topics": "t1"}
    mirror.selection = TopicSelection("A", "B", DefaultReplicationPolicy(), topic_filter_for(mirror._originals, None),
                                      False)
    mirror.selection_store = Store()
    mirror._selection_key = SelectionKey("m", "A", "B")
    mirror._stored_includes = connector_module._UNSET
    mirror._selection_denied = False

    async def selected(answer) -> list[str]:
        answers.append(answer)
        await mirror._apply_stored_selection()
        return [t for t in ("t1", "t2", "t3") if mirror.selection.should_replicate(t)]

    assert await selected(None) == ["t1"]
    assert await selected(StoredSelection(("t2", "t3"), 1)) == ["t2", "t3"]
    assert await selected(StoredSelection(("",), 2)) == []
    assert await selected(None) == ["t1"]  # tombstone: back to `topics`
    with caplog.at_level("INFO"):
        assert await selected(SelectionAccessDenied("not authorized")) == ["t1"]
        assert await selected(SelectionAccessDenied("not authorized")) == ["t1"]
    assert sum("not authorized" in r.getMessage() for r in caplog.records) == 1  # said once


def test_cli_refuses_unresolved_config_provider_references(tmp_path, capsys):
    props = tmp_path / "mm2.properties"
    props.write_text("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
                     "B.security.protocol = SASL_PLAINTEXT\nB.sasl.jaas.config = ${file:/etc/secret.properties:jaas}\n")
    assert cli.main(["mirroring", "active-topics", str(props), "--flow", "A->B"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "config-provider references" in err[0] and "sasl.jaas.config" in err[0], err
