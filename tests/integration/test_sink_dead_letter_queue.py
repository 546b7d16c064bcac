"""Sink error handling against real Kafka: a JSON value converter meets records that are not JSON.

``errors.tolerance=all`` with a dead-letter queue: the DLQ holds exactly the bad records, as
consumed (key, value, headers), with Connect's ``__connect.errors.*`` context headers, and the
sink gets the good ones. ``errors.tolerance=none``: the task is FAILED and its trace names the
record's topic, partition and offset.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from support.kafka import group_offsets, produce, read_all
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

JSON = {"value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false"}


def records(count: int) -> tuple[list[tuple], set[int]]:
    """``count`` records on partition 0; every fifth value is not JSON. Returns them and the bad indexes."""
    out, bad = [], set()
    for i in range(count):
        if i % 5 == 3:
            bad.add(i)
            value = f"not json {i} {{".encode()
        else:
            value = json.dumps({"id": i, "name": f"n{i}"}).encode()
        out.append((0, f"k{i}".encode(), value, [("origin", f"h{i}".encode())], None))
    return out, bad


async def wait_lines(path: Path, count: int, timeout: float = 30.0) -> list[str]:
    deadline = asyncio.get_running_loop().time() + timeout
    while len(lines := (path.read_text().splitlines() if path.exists() else [])) < count:
        assert asyncio.get_running_loop().time() < deadline, f"{path} has {len(lines)} lines, expected {count}"
        await asyncio.sleep(0.2)
    return lines


async def test_tolerated_bad_records_go_to_the_dlq_with_context_headers(cluster_a, make_topic, unique_name,
                                                                        tmp_path):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, partitions=1)
    dlq, name, sink_file = unique_name("dlq"), unique_name("dlqsink"), tmp_path / "out.txt"
    sent, bad = records(40)
    await produce(bootstrap, topic, sent)
    config = {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic, **JSON,
              "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
              "errors.deadletterqueue.context.headers.enable": "true",
              "errors.deadletterqueue.topic.replication.factor": "1"}
    async with running_standalone({"bootstrap.servers": bootstrap}) as url:
        async with Rest(url) as rest:
            assert (await rest.call("PUT", f"/connectors/{name}/config", config))[0] == 201
            await rest.wait_for(f"/connectors/{name}/status", all_running(1))
            lines = await wait_lines(sink_file, 40 - len(bad))
            dead = (await read_all(bootstrap, dlq, expect=len(bad)))[0]
            await rest.wait_for(f"/connectors/{name}/status", all_running(1))  # still running
        # the bad records were skipped, not stuck: the group committed past them
    assert (await group_offsets(bootstrap, f"connect-{name}"))[(topic, 0)] == 40

    # The sink got the good records, in order, as the JSON converter read them.
    assert [json.loads(line)["id"] for line in lines] == [i for i in range(40) if i not in bad]
    # The DLQ holds exactly the bad ones, as consumed, with the context headers.
    assert [(r.key, r.value) for r in dead] == [(sent[i][1], sent[i][2]) for i in sorted(bad)]
    for record, i in zip(dead, sorted(bad)):
        headers = dict(record.headers)
        assert record.headers[0] == ("origin", f"h{i}".encode())  # the original headers come first
        assert headers["__connect.errors.topic"] == topic.encode()
        assert headers["__connect.errors.partition"] == b"0"
        assert headers["__connect.errors.offset"] == str(i).encode()
        assert headers["__connect.errors.connector.name"] == name.encode()
        assert headers["__connect.errors.task.id"] == b"0"
        assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
        assert b"JsonConverter" in headers["__connect.errors.class.name"]
        assert headers["__connect.errors.exception.class.name"]
        assert headers["__connect.errors.exception.message"]
        assert b"Traceback" in headers["__connect.errors.exception.stacktrace"]


async def test_untolerated_bad_record_fails_the_task_naming_its_position(cluster_a, make_topic, unique_name,
                                                                          tmp_path):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, partitions=1)
    name, sink_file = unique_name("failsink"), tmp_path / "out.txt"
    sent, bad = records(10)  # record 3 is the first bad one
    await produce(bootstrap, topic, sent)
    config = {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic, **JSON}
    worker = {"bootstrap.servers": bootstrap, "restart.on.failure.enable": "false"}
    async with running_standalone(worker) as url:
        async with Rest(url) as rest:
            assert (await rest.call("PUT", f"/connectors/{name}/config", config))[0] == 201
            status = await rest.wait_for(f"/connectors/{name}/status",
                                         lambda s: s["tasks"] and s["tasks"][0]["state"] == "FAILED")
    trace = status["tasks"][0]["trace"]
    assert f"topic {topic} partition 0 offset 3" in trace
    assert "VALUE_CONVERTER" in trace and "Tolerance exceeded" in trace
    # nothing past the bad record was committed: a restart after a fix starts at it again
    assert (await group_offsets(bootstrap, f"connect-{name}")).get((topic, 0), 0) <= 3
