"""The file connectors through the REST API: file -> FileStreamSource -> cluster A -> FileStreamSink -> file.

Proves the sink runtime end to end: the consumer group ``connect-<name>``, commit after flush,
resume after a restart of the worker, Connect's config errors on the fields, and the plugins
listing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from support.kafka import group_offsets, produce, read_all
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration


def lines_of(path: Path) -> list[str]:
    """The complete lines of a file (none if it does not exist)."""
    return path.read_text().splitlines() if path.exists() else []


async def wait_lines(path: Path, count: int, timeout: float = 30.0) -> list[str]:
    """Wait until ``path`` holds at least ``count`` lines; returns them."""
    deadline = asyncio.get_running_loop().time() + timeout
    while len(lines := lines_of(path)) < count:
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{path} has {len(lines)} lines, expected {count}")
        await asyncio.sleep(0.2)
    return lines


def append(path: Path, lines: list[str]) -> None:
    with path.open("a") as file:
        file.write("".join(f"{line}\n" for line in lines))


async def test_file_source_to_topic_to_file_sink_in_order_and_resumes_after_restart(
        cluster_a, make_topic, unique_name, tmp_path):
    topic = await make_topic(cluster_a, partitions=1)
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    first = [f"line {i} ünïcode" for i in range(500)]
    append(source_file, first)
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    source, sink = unique_name("fsrc"), unique_name("fsink")
    source_config = {"connector.class": "FileStreamSource", "file": str(source_file), "topic": topic,
                     "batch.size": "100"}
    sink_config = {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                   "file": str(sink_file), "topics": topic}

    async with running_standalone(worker) as url:
        async with Rest(url) as rest:
            assert (await rest.call("PUT", f"/connectors/{source}/config", source_config))[0] == 201
            assert (await rest.call("PUT", f"/connectors/{sink}/config", sink_config))[0] == 201
            status = await rest.wait_for(f"/connectors/{sink}/status", all_running(1))
            assert status["type"] == "sink"
            assert await wait_lines(sink_file, 500) == first
            # lines appended while running follow, in order
            append(source_file, ["late 1", "late 2"])
            assert (await wait_lines(sink_file, 502))[500:] == ["late 1", "late 2"]
    # The graceful stop flushed the sink and committed its group's offsets: the whole topic.
    assert (await group_offsets(cluster_a.bootstrap_servers, f"connect-{sink}"))[(topic, 0)] == 502

    # Lines added while the worker is down are read on restart, from the stored position.
    second = [f"after restart {i}" for i in range(100)]
    append(source_file, second)
    async with running_standalone(worker) as url:
        async with Rest(url) as rest:
            for name, config in ((source, source_config), (sink, sink_config)):
                assert (await rest.call("PUT", f"/connectors/{name}/config", config))[0] == 201
            await rest.wait_for(f"/connectors/{sink}/status", all_running(1))
            await wait_lines(sink_file, 602)
            await asyncio.sleep(1.0)  # anything written twice would show up by now
    # Every line once, in order: the source resumed after its stored position, the sink after
    # its committed offset.
    assert lines_of(sink_file) == first + ["late 1", "late 2"] + second
    records = [r.value for r in (await read_all(cluster_a.bootstrap_servers, topic))[0]]
    assert records == [line.encode() for line in first + ["late 1", "late 2"] + second]


async def test_sink_with_topics_regex_and_string_values(cluster_a, make_topic, unique_name, tmp_path):
    prefix = unique_name("rx")
    topics = [await make_topic(cluster_a, partitions=2, prefix=f"{prefix}-{i}") for i in range(2)]
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    append(source_file, [f"v{i}" for i in range(50)])
    async with running_standalone({"bootstrap.servers": cluster_a.bootstrap_servers}) as url:
        async with Rest(url) as rest:
            for i, topic in enumerate(topics):
                config = {"connector.class": "FileStreamSource", "file": str(source_file), "topic": topic,
                          "value.converter": "org.apache.kafka.connect.storage.StringConverter"}
                assert (await rest.call("PUT", f"/connectors/{unique_name(f'src{i}')}/config", config))[0] == 201
            sink = unique_name("rxsink")
            config = {"connector.class": "FileStreamSink", "file": str(sink_file), "tasks.max": "2",
                      "topics.regex": f"{prefix}-.*"}
            assert (await rest.call("PUT", f"/connectors/{sink}/config", config))[0] == 201
            await rest.wait_for(f"/connectors/{sink}/status", all_running(2))
            lines = await wait_lines(sink_file, 100)
    assert sorted(lines) == sorted(f"v{i}" for i in range(50) for _ in topics)


async def test_bad_sink_configs_are_refused_naming_the_field(cluster_a, unique_name, tmp_path):
    async with running_standalone({"bootstrap.servers": cluster_a.bootstrap_servers}) as url:
        async with Rest(url) as rest:
            base = {"connector.class": "FileStreamSink", "file": str(tmp_path / "out.txt")}
            status, body = await rest.call("PUT", f"/connectors/{unique_name('both')}/config",
                                           {**base, "topics": "a", "topics.regex": "a.*"})
            assert status == 400
            assert "topics: topics and topics.regex are mutually exclusive options, but both are set." \
                in body["message"]
            status, body = await rest.call("PUT", f"/connectors/{unique_name('none')}/config", base)
            assert status == 400
            assert "topics: Must configure one of topics or topics.regex" in body["message"]
            assert "topics.regex: Must configure one of topics or topics.regex" in body["message"]
            status, body = await rest.call("PUT", f"/connectors/{unique_name('rx')}/config",
                                           {**base, "topics.regex": "a(["})
            assert status == 400 and "topics.regex" in body["message"]
            status, body = await rest.call("PUT", f"/connectors/{unique_name('cls')}/config",
                                           {**base, "connector.class": "NoSuchSink", "topics": "a"})
            assert status == 400 and "NoSuchSink" in body["message"]

            # config/validate reports the same on the fields, as Connect does
            status, body = await rest.call("PUT", "/connector-plugins/FileStreamSink/config/validate",
                                           {**base, "name": "v", "topics": "a", "topics.regex": "a.*"})
            assert status == 200
            errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
            assert errors["topics"] and errors["topics.regex"] and body["error_count"] == 2

            status, plugins = await rest.call("GET", "/connector-plugins")
            types = {p["class"]: p["type"] for p in plugins}
            assert types["mirrorline.connectors.file.sink.FileStreamSinkConnector"] == "sink"
            assert types["mirrorline.connectors.file.source.FileStreamSourceConnector"] == "source"


async def test_sink_offsets_are_its_group_offsets_and_can_be_altered_and_reset(cluster_a, make_topic, unique_name,
                                                                               tmp_path):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, partitions=1)
    await produce(bootstrap, topic, [(0, None, f"v{i}".encode(), None, None) for i in range(10)])
    sink_file, name = tmp_path / "out.txt", unique_name("offs")
    config = {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic}
    where = {"kafka_topic": topic, "kafka_partition": 0}
    async with running_standalone({"bootstrap.servers": bootstrap}) as url:
        async with Rest(url) as rest:
            assert (await rest.call("PUT", f"/connectors/{name}/config", config))[0] == 201
            await wait_lines(sink_file, 10)
            body = await rest.wait_for(f"/connectors/{name}/offsets", lambda b: b["offsets"])
            assert body == {"offsets": [{"partition": where, "offset": {"kafka_offset": 10}}]}

            status, body = await rest.call("PATCH", f"/connectors/{name}/offsets",
                                           {"offsets": [{"partition": where, "offset": {"kafka_offset": 5}}]})
            assert status == 400  # not stopped
            assert (await rest.call("PUT", f"/connectors/{name}/stop"))[0] == 204
            await rest.wait_for(f"/connectors/{name}/status", lambda s: s["connector"]["state"] == "STOPPED")
            status, body = await rest.call("PATCH", f"/connectors/{name}/offsets",
                                           {"offsets": [{"partition": {"kafka_topic": topic},
                                                         "offset": {"kafka_offset": 5}}]})
            assert status == 400 and "kafka_partition" in body["message"]
            status, body = await rest.call("PATCH", f"/connectors/{name}/offsets",
                                           {"offsets": [{"partition": where, "offset": {"kafka_offset": 5}}]})
            assert status == 200, body
            assert (await rest.call("GET", f"/connectors/{name}/offsets"))[1]["offsets"][0]["offset"] == \
                {"kafka_offset": 5}
            assert (await rest.call("PUT", f"/connectors/{name}/resume"))[0] == 202
            assert (await wait_lines(sink_file, 15))[10:] == [f"v{i}" for i in range(5, 10)]  # re-read from 5

            assert (await rest.call("PUT", f"/connectors/{name}/stop"))[0] == 204
            await rest.wait_for(f"/connectors/{name}/status", lambda s: s["connector"]["state"] == "STOPPED")
            status, body = await rest.call("DELETE", f"/connectors/{name}/offsets")
            assert status == 200, body
            assert (await rest.call("GET", f"/connectors/{name}/offsets"))[1] == {"offsets": []}
