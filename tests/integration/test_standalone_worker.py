"""The standalone worker against real Kafka, driven by connector files and the REST API.

The connector under test is the example third-party plugin (tests/plugins/example_plugin),
installed as its own distribution and found only through its entry point.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from support.kafka import read_all
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

SEQUENCE = "mirrorline_example.sequence.SequenceSourceConnector"


async def sequences(bootstrap: str, topic: str, expect: int | None = None) -> dict[int, list[int]]:
    """Sequence numbers per stream, in the order they are stored in the topic."""
    out: dict[int, list[int]] = {}
    for records in (await read_all(bootstrap, topic, expect=expect)).values():
        for record in records:
            value = json.loads(record.value)
            out.setdefault(value["stream"], []).append(value["seq"])
    return out


def assert_complete(seqs: dict[int, list[int]], streams: int, allow_duplicates: bool = False) -> int:
    """Every stream holds 0..n with no gap (and no repeat unless allowed); returns the duplicate count."""
    assert sorted(seqs) == list(range(streams))
    duplicates = 0
    for stream, numbers in seqs.items():
        assert set(numbers) == set(range(max(numbers) + 1)), f"stream {stream} has a gap"
        duplicates += len(numbers) - len(set(numbers))
    if not allow_duplicates:
        assert duplicates == 0
    return duplicates


async def test_worker_resumes_from_committed_offsets_after_restart(cluster_a, make_topic, unique_name, tmp_path):
    topic = await make_topic(cluster_a, partitions=3)
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    connector = {"name": unique_name("seq"), "connector.class": "SequenceSource", "tasks.max": "2",
                 "topic": topic, "streams": "4", "records.per.poll": "50", "poll.interval.ms": "10"}

    async with running_standalone(worker, [connector]) as url:
        async with Rest(url) as rest:
            await rest.wait_for(f"/connectors/{connector['name']}/status", all_running(2))
            first = await rest.wait_for(f"/connectors/{connector['name']}/offsets",
                                        lambda body: len(body["offsets"]) == 4)
    before = await sequences(cluster_a.bootstrap_servers, topic)
    assert_complete(before, 4)
    assert all(len(numbers) >= 1 for numbers in before.values())
    assert {o["partition"]["stream"] for o in first["offsets"]} == {0, 1, 2, 3}

    # After a graceful stop the offsets file holds exactly the last written number of each stream.
    stored = json.loads((tmp_path / "offsets.json").read_text())["offsets"]
    assert {o["partition"]["stream"]: o["offset"]["seq"] for o in stored} == {s: max(n) for s, n in before.items()}

    async with running_standalone(worker, [connector]) as url:
        async with Rest(url) as rest:
            await rest.wait_for(f"/connectors/{connector['name']}/status", all_running(2))
            await asyncio.sleep(1.0)
    after = await sequences(cluster_a.bootstrap_servers, topic)
    assert_complete(after, 4)  # resumed after the last committed number: no gap, no repeat
    assert all(max(after[s]) > max(before[s]) for s in range(4))


async def test_rest_lifecycle_of_a_connector(cluster_a, make_topic, unique_name, tmp_path):
    topic = await make_topic(cluster_a, partitions=2)
    name = unique_name("rest")
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    config = {"connector.class": SEQUENCE, "tasks.max": "2", "topic": topic, "streams": "2",
              "records.per.poll": "20", "poll.interval.ms": "20"}
    async with running_standalone(worker) as url, Rest(url) as rest:
        # the third-party plugin is visible
        status, plugins = await rest.call("GET", "/connector-plugins")
        assert status == 200
        assert {"class": SEQUENCE, "type": "source", "version": "0.1.0"} in plugins

        # create
        status, info = await rest.call("POST", "/connectors", {"name": name, "config": config})
        assert status == 201, info
        assert info["name"] == name and info["type"] == "source"
        assert info["tasks"] == [{"connector": name, "task": 0}, {"connector": name, "task": 1}]
        status, names = await rest.call("GET", "/connectors")
        assert name in names
        status, again = await rest.call("POST", "/connectors", {"name": name, "config": config})
        assert status == 409 and "already exists" in again["message"]
        await rest.wait_for(f"/connectors/{name}/status", all_running(2))
        status, expanded = await rest.call("GET", "/connectors?expand=status&expand=info")
        assert expanded[name]["status"]["connector"]["state"] == "RUNNING"
        assert expanded[name]["info"]["config"]["topic"] == topic

        # pause: the topic stops growing
        assert (await rest.call("PUT", f"/connectors/{name}/pause"))[0] == 202
        await rest.wait_for(f"/connectors/{name}/status",
                            lambda s: s["connector"]["state"] == "PAUSED" and
                            all(t["state"] == "PAUSED" for t in s["tasks"]))
        await asyncio.sleep(0.5)
        paused_count = sum(len(v) for v in (await sequences(cluster_a.bootstrap_servers, topic)).values())
        await asyncio.sleep(1.0)
        assert sum(len(v) for v in (await sequences(cluster_a.bootstrap_servers, topic)).values()) == paused_count

        # resume: it grows again
        assert (await rest.call("PUT", f"/connectors/{name}/resume"))[0] == 202
        await rest.wait_for(f"/connectors/{name}/status", all_running(2))
        await sequences(cluster_a.bootstrap_servers, topic, expect=paused_count + 20)

        # restart connector and tasks
        status, plan = await rest.call("POST", f"/connectors/{name}/restart?includeTasks=true")
        assert status == 202 and plan["connector"]["state"] == "RESTARTING"
        assert [t["state"] for t in plan["tasks"]] == ["RESTARTING", "RESTARTING"]
        await rest.wait_for(f"/connectors/{name}/status", all_running(2))
        assert (await rest.call("POST", f"/connectors/{name}/restart"))[0] == 204
        assert (await rest.call("POST", f"/connectors/{name}/tasks/1/restart"))[0] == 204
        status, task = await rest.call("GET", f"/connectors/{name}/tasks/0/status")
        assert status == 200 and task["id"] == 0

        # reconfigure: three streams over three tasks
        status, info = await rest.call("PUT", f"/connectors/{name}/config",
                                       {**config, "streams": "3", "tasks.max": "3"})
        assert status == 200 and len(info["tasks"]) == 3
        await rest.wait_for(f"/connectors/{name}/status", all_running(3))
        status, tasks = await rest.call("GET", f"/connectors/{name}/tasks")
        assert [t["config"]["task.streams"] for t in tasks] == ["0", "1", "2"]
        status, info = await rest.call("PATCH", f"/connectors/{name}/config", {"records.per.poll": "5"})
        assert status == 200 and info["config"]["records.per.poll"] == "5"

        await _wait_for_seq(cluster_a.bootstrap_servers, topic, stream=2, at_least=1)

        # topics the connector wrote to
        status, topics = await rest.call("GET", f"/connectors/{name}/topics")
        assert status == 200 and topics == {name: {"topics": [topic]}}

        # offsets can only be altered when stopped
        status, error = await rest.call("DELETE", f"/connectors/{name}/offsets")
        assert status == 400 and "STOPPED" in error["message"]
        assert (await rest.call("PUT", f"/connectors/{name}/stop"))[0] == 204
        status, stopped = await rest.call("GET", f"/connectors/{name}/status")
        assert stopped["connector"]["state"] == "STOPPED" and stopped["tasks"] == []
        status, offsets = await rest.call("GET", f"/connectors/{name}/offsets")
        assert status == 200 and {o["partition"]["stream"] for o in offsets["offsets"]} == {0, 1, 2}
        # how far stream 0 got depends on how fast the machine is: jump well past it
        stored = {o["partition"]["stream"]: o["offset"]["seq"] for o in offsets["offsets"]}[0]
        jump = stored + 1000
        status, message = await rest.call("PATCH", f"/connectors/{name}/offsets", {"offsets": [
            {"partition": {"stream": 0}, "offset": {"seq": jump}}]})
        assert status == 200 and message["message"] == "The offsets for this connector have been altered successfully"
        status, offsets = await rest.call("GET", f"/connectors/{name}/offsets")
        assert {"partition": {"stream": 0}, "offset": {"seq": jump}} in offsets["offsets"]

        # resume from the altered offset: stream 0 continues right after it, nothing in between
        assert (await rest.call("PUT", f"/connectors/{name}/resume"))[0] == 202
        await rest.wait_for(f"/connectors/{name}/status", all_running(3))
        seqs = await _wait_for_seq(cluster_a.bootstrap_servers, topic, stream=0, at_least=jump + 1)
        assert jump + 1 in seqs[0] and not any(stored < n <= jump for n in seqs[0])

        # delete
        assert (await rest.call("DELETE", f"/connectors/{name}"))[0] == 204
        assert (await rest.call("GET", f"/connectors/{name}"))[0] == 404
        assert name not in (await rest.call("GET", "/connectors"))[1]


async def _wait_for_seq(bootstrap, topic, stream, at_least, timeout=30.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        seqs = await sequences(bootstrap, topic)
        if max(seqs.get(stream, [-1])) >= at_least or asyncio.get_running_loop().time() > deadline:
            return seqs
        await asyncio.sleep(0.3)


async def test_bad_requests_get_4xx_with_a_message(cluster_a, unique_name):
    async with running_standalone({"bootstrap.servers": cluster_a.bootstrap_servers}) as url, Rest(url) as rest:
        status, body = await rest.call("POST", "/connectors", raw='{"name": "x", "config": {')
        assert status == 400 and "JSON" in body["message"] and body["error_code"] == 400

        status, body = await rest.call("POST", "/connectors", {"name": unique_name("c"), "config": {
            "connector.class": "com.example.DoesNotExist", "topic": "t"}})
        assert status == 400 and "com.example.DoesNotExist" in body["message"]

        status, body = await rest.call("POST", "/connectors", {"name": unique_name("c"), "config": {
            "connector.class": "SequenceSource"}})
        assert status == 400 and 'Missing required configuration "topic"' in body["message"]
        assert body["message"].startswith("Connector configuration is invalid and contains the following 1 error(s)")

        status, body = await rest.call("POST", "/connectors", {"name": unique_name("c"), "config": {
            "connector.class": "SequenceSource", "topic": "t", "streams": "zero", "tasks.max": "0"}})
        assert status == 400 and "streams" in body["message"] and "tasks.max" in body["message"]
        assert "2 error(s)" in body["message"]

        status, body = await rest.call("GET", "/connectors/nope/status")
        assert status == 404 and body == {"error_code": 404, "message": "Connector nope not found"}

        status, body = await rest.call("PUT", "/connector-plugins/SequenceSource/config/validate",
                                       {"connector.class": "SequenceSource", "name": "v", "streams": "-1"})
        assert status == 200 and body["error_count"] == 2
        errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]}
        assert set(errors) == {"topic", "streams"}

        status, body = await rest.call("GET", "/connector-plugins/SequenceSource/config")
        assert status == 200 and {"topic", "streams", "records.per.poll"} <= {k["name"] for k in body}
        # nothing was created by the failed requests
        assert (await rest.call("GET", "/connectors"))[1] == []


async def test_failed_task_is_reported_and_others_keep_running(cluster_a, make_topic, unique_name):
    topic = await make_topic(cluster_a, partitions=2)
    name = unique_name("fail")
    config = {"connector.class": "com.example.SequenceSource", "tasks.max": "2", "topic": topic, "streams": "2",
              "records.per.poll": "10", "poll.interval.ms": "20", "fail.on.seq": "30", "fail.on.stream": "1"}
    # Connect's behaviour: a failed task waits for a manual restart (automatic restarts are tested in
    # test_supervision.py).
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers, "restart.on.failure.enable": "false"}
    async with running_standalone(worker) as url, Rest(url) as rest:
        created = await rest.call("POST", "/connectors", {"name": name, "config": config})
        assert created[0] == 201, created
        status = await rest.wait_for(f"/connectors/{name}/status",
                                     lambda s: any(t["state"] == "FAILED" for t in s["tasks"]))
        failed = [t for t in status["tasks"] if t["state"] == "FAILED"]
        assert [t["id"] for t in failed] == [1]
        assert "Traceback" in failed[0]["trace"] and "30" in failed[0]["trace"]
        assert status["connector"]["state"] == "RUNNING"
        before = await sequences(cluster_a.bootstrap_servers, topic)
        await asyncio.sleep(1.0)
        after = await sequences(cluster_a.bootstrap_servers, topic)
        assert len(after[0]) > len(before[0])  # task 0 still writes
        assert max(after[1]) < 30

        status, plan = await rest.call("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true")
        assert status == 202
        assert plan["connector"]["state"] == "RUNNING"
        assert [t["state"] for t in plan["tasks"]] == ["RUNNING", "RESTARTING"]


async def test_worker_endpoints_and_initial_state(cluster_a, make_topic, unique_name):
    topic = await make_topic(cluster_a)
    async with running_standalone({"bootstrap.servers": cluster_a.bootstrap_servers}) as url, Rest(url) as rest:
        status, info = await rest.call("GET", "/")
        assert status == 200 and info["kafka_cluster_id"] and info["version"]
        status, health = await rest.call("GET", "/health")
        assert status == 200 and health["status"] == "healthy"

        # created STOPPED: no tasks run and nothing is written until resumed
        name = unique_name("init")
        status, created = await rest.call("POST", "/connectors", {
            "name": name, "initial_state": "STOPPED",
            "config": {"connector.class": "SequenceSource", "topic": topic, "poll.interval.ms": "10"}})
        assert status == 201 and created["tasks"] == []
        status, state = await rest.call("GET", f"/connectors/{name}/status")
        assert state["connector"]["state"] == "STOPPED" and state["tasks"] == []
        assert sum(len(r) for r in (await read_all(cluster_a.bootstrap_servers, topic)).values()) == 0
        assert (await rest.call("PUT", f"/connectors/{name}/resume"))[0] == 202
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        await read_all(cluster_a.bootstrap_servers, topic, expect=10)

        # validate refuses a body naming another plugin
        status, body = await rest.call("PUT", "/connector-plugins/SequenceSource/config/validate",
                                       {"connector.class": "com.example.Other", "topic": "t"})
        assert status == 400 and "does not match" in body["message"]

        # log levels change at run time
        status, changed = await rest.call("PUT", "/admin/loggers/mirrorline.runtime", {"level": "DEBUG"})
        assert status == 200 and "mirrorline.runtime" in changed
        status, level = await rest.call("GET", "/admin/loggers/mirrorline.runtime")
        assert level["level"] == "DEBUG"
        status, body = await rest.call("PUT", "/admin/loggers/mirrorline.runtime", {"level": "LOUD"})
        assert status == 404
        await rest.call("PUT", "/admin/loggers/mirrorline.runtime", {"level": "INFO"})

        # the OpenAPI document describes the served API
        status, doc = await rest.call("GET", "/openapi.json")
        assert status == 200 and doc["openapi"].startswith("3.")
        assert "/connectors/{connector}/offsets" in doc["paths"] or any(
            p.startswith("/connectors/") and p.endswith("/offsets") for p in doc["paths"])
