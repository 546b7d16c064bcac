"""The stall watchdog on a real broker: a task with records waiting upstream whose target stops
answering says so (status warning and metric) while it lasts, and recovers without loss. And the
bound on unacknowledged writes: a task whose target stops answering for longer than the producer's
``delivery.timeout.ms`` is FAILED with the reason (not left RUNNING), and is restarted by
``restart.on.failure.enable`` once the target answers again, losing nothing.

Runs on the fault scenarios' own clusters (FA/FB): the target broker is frozen with SIGSTOP.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from support.faults import paused_broker
from support.kafka import create_topic, produce, read_all
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

RECORDS = 200


def _stalled(status: dict) -> bool:
    return any(any(w.startswith("stalled") for w in t.get("warnings", [])) for t in status["tasks"])


def _metric(text: str, name: str, connector: str) -> float:
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith(name + "{") and f'connector="{connector}"' in line]
    return max(values, default=0.0)


async def test_stalled_task_is_flagged_while_the_target_is_frozen(broken_clusters, unique_name, tmp_path):
    source, target = broken_clusters.source, broken_clusters.target
    topic = unique_name("stall")
    await create_topic(source.bootstrap_servers, topic, 2)
    name = unique_name("mirror")
    config = {"name": name, "connector.class": "MirrorSource", "source.cluster.alias": "FA",
              "target.cluster.alias": "FB", "source.cluster.bootstrap.servers": source.bootstrap_servers,
              "target.cluster.bootstrap.servers": target.bootstrap_servers, "topics": topic,
              "replication.factor": "1", "offset-syncs.topic.replication.factor": "1", "tasks.max": "1",
              "emit.offset-syncs.enabled": "false"}
    worker = {"bootstrap.servers": target.bootstrap_servers, "task.stall.timeout.ms": "2000",
              "offset.storage.file.filename": str(tmp_path / "offsets")}
    async with running_standalone(worker, [config]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        await produce(source.bootstrap_servers, topic, [(i % 2, None, f"a{i}".encode(), [], None)
                                                        for i in range(RECORDS)])
        await read_all(target.bootstrap_servers, f"FA.{topic}", expect=RECORDS, timeout=60)
        with paused_broker(broken_clusters.target_cluster):
            await produce(source.bootstrap_servers, topic, [(i % 2, None, f"b{i}".encode(), [], None)
                                                            for i in range(RECORDS)])
            status = await rest.wait_for(f"/connectors/{name}/status", _stalled, timeout=30)
            assert status["tasks"][0]["state"] == "RUNNING"  # stuck is not failed
            _, text = await rest.call("GET", "/metrics")
            assert _metric(text, "kafka_connect_task_stalled", name) == 1.0
        await rest.wait_for(f"/connectors/{name}/status", lambda s: all_running(1)(s) and not _stalled(s),
                            timeout=90)
        copied = await read_all(target.bootstrap_servers, f"FA.{topic}", expect=2 * RECORDS, timeout=90)
        values = {r.value for records in copied.values() for r in records}
        assert values == {f"{p}{i}".encode() for p in "ab" for i in range(RECORDS)}
        _, text = await rest.call("GET", "/metrics")
        assert _metric(text, "kafka_connect_task_stalled", name) == 0.0


async def test_writes_unacknowledged_past_delivery_timeout_fail_the_task_which_restarts(broken_clusters, unique_name,
                                                                                       tmp_path):
    target = broken_clusters.target
    topic = unique_name("unacked")
    await create_topic(target.bootstrap_servers, topic, 1)
    name = unique_name("seq")
    total = 2000
    config = {"name": name, "connector.class": "SequenceSource", "topic": topic, "records.per.poll": "50",
              "poll.interval.ms": "50", "max.records": str(total), "producer.override.delivery.timeout.ms": "3000"}
    worker = {"bootstrap.servers": target.bootstrap_servers, "offset.storage.file.filename": str(tmp_path / "offsets"),
              "restart.backoff.initial.ms": "1000", "restart.backoff.max.ms": "2000"}
    async with running_standalone(worker, [config]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        await read_all(target.bootstrap_servers, topic, expect=100, timeout=30)
        with paused_broker(broken_clusters.target_cluster):
            failed = await rest.wait_for(f"/connectors/{name}/status",
                                         lambda s: s["tasks"][0]["state"] == "FAILED", timeout=30)
        trace = failed["tasks"][0]["trace"]
        assert "delivery.timeout.ms=3000" in trace, trace
        assert failed["connector"]["state"] == "RUNNING"
        await rest.wait_for(f"/connectors/{name}/status",
                            lambda s: s["tasks"][0].get("restarts", 0) >= 1 and all_running(1)(s), timeout=90)
        # done once the last record's offset is stored (a count would also count the records written twice)
        await rest.wait_for(f"/connectors/{name}/offsets",
                            lambda o: [e["offset"]["seq"] for e in o["offsets"]] == [total - 1], timeout=90)
        copied = await read_all(target.bootstrap_servers, topic, timeout=30)
    seqs = {json.loads(r.value)["seq"] for r in copied[0]}
    assert seqs == set(range(total))  # restarted from its stored offsets: nothing lost (repeats allowed)
