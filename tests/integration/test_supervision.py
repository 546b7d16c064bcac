"""Supervision against real Kafka: nothing stops silently, failures restart by themselves, and
every start and stop is bounded so a stuck connector never blocks the worker."""

from __future__ import annotations

import asyncio
import re

import pytest

from support.kafka import create_topic, produce, read_all
from support.worker import Rest, running_standalone
from test_standalone_worker import sequences  # same folder: on sys.path under pytest

pytestmark = pytest.mark.integration


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one Prometheus sample in ``text`` (0 if absent)."""
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_failed_task_restarts_by_itself_with_backoff(cluster_a, make_topic, unique_name):
    topic = await make_topic(cluster_a, partitions=2)
    name = unique_name("flaky")
    # stream 1 fails each time it reaches 30, so every automatic restart fails again: the back-off grows
    config = {"name": name, "connector.class": "SequenceSource", "tasks.max": "2", "topic": topic, "streams": "2",
              "records.per.poll": "10", "poll.interval.ms": "20", "fail.on.seq": "30", "fail.on.stream": "1"}
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers, "restart.backoff.initial.ms": "200",
              "restart.backoff.max.ms": "1600"}
    async with running_standalone(worker, [config]) as url, Rest(url) as rest:
        status = await rest.wait_for(f"/connectors/{name}/status",
                                     lambda s: any(t.get("restarts", 0) >= 3 for t in s["tasks"]), timeout=60)
        task1 = next(t for t in status["tasks"] if t["id"] == 1)
        task0 = next(t for t in status["tasks"] if t["id"] == 0)
        assert task0["state"] == "RUNNING" and "restarts" not in task0
        if task1["state"] == "FAILED":
            assert "fail.on.seq" in task1["trace"] and task1["next_restart_in_ms"] <= 1600
        _, text = await rest.call("GET", "/metrics")
        restarts = metric(text, "kafka_connect_task_restarts_total", connector=name, task="1")
        failures = metric(text, "kafka_connect_task_failures_total", connector=name, task="1")
        assert restarts >= 3 and failures >= restarts
        assert metric(text, "kafka_connect_task_failures_total", connector=name, task="0") == 0
        seqs = await sequences(cluster_a.bootstrap_servers, topic)
        assert set(seqs[1]) == set(range(30))  # every restart resumed where it stopped: nothing lost
        assert len(seqs[0]) > 30

        # a manual restart clears the automatic-restart history, as a fresh start
        code, _ = await rest.call("POST", f"/connectors/{name}/tasks/1/restart")
        assert code == 204


async def test_record_refused_by_the_target_fails_the_task_naming_where(cluster_a, cluster_b, make_topic,
                                                                        flow_config, unique_name):
    source = await make_topic(cluster_a, partitions=1)
    # The remote topic exists with a small max.message.bytes (config sync off so it stays that way).
    await create_topic(cluster_b.bootstrap_servers, f"A.{source}", 1, {"max.message.bytes": "2000"})
    await produce(cluster_a.bootstrap_servers, source, [(0, b"k", b"small", [], None)])
    name = unique_name("big")
    config = flow_config(topics=source, tasks_max=1, sync_topic_configs_enabled="false")
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers, "restart.on.failure.enable": "false"}
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        assert [r.value for r in (await read_all(cluster_b.bootstrap_servers, f"A.{source}", expect=1))[0]] \
            == [b"small"]
        await produce(cluster_a.bootstrap_servers, source, [(0, b"k", b"x" * 20_000, [], None),
                                                            (0, b"k", b"after", [], None)])
        status = await rest.wait_for(f"/connectors/{name}/status",
                                     lambda s: any(t["state"] == "FAILED" for t in s["tasks"]), timeout=60)
        trace = status["tasks"][0]["trace"]
        assert f"topic A.{source} partition 0" in trace
        assert "source offset {'offset': 1}" in trace
        assert "MessageSizeTooLarge" in trace
        assert status["connector"]["state"] == "RUNNING"
        copied = await read_all(cluster_b.bootstrap_servers, f"A.{source}", timeout=3)
        # the record before it was copied; nothing after it was (order kept: no skipping past the refusal)
        assert [r.value for r in copied.get(0, [])] == [b"small"]


async def test_concurrent_config_puts_never_block_the_worker(cluster_a, cluster_b, make_topic, flow_config,
                                                             unique_name):
    """Two simultaneous PUTs for a new MirrorSource once blocked a standalone worker for good."""
    topic = await make_topic(cluster_a, partitions=4)
    name = unique_name("race")
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers, "task.shutdown.graceful.timeout.ms": "3000"}
    async with running_standalone(worker) as url, Rest(url) as rest:
        puts = [rest.call("PUT", f"/connectors/{name}/config", flow_config(topics=topic, tasks_max=n))
                for n in (1, 2)]
        answers = await asyncio.wait_for(asyncio.gather(*puts), 60)
        assert sorted(code for code, _ in answers) == [200, 201]
        await rest.wait_for(f"/connectors/{name}/status", lambda s: s["connector"]["state"] == "RUNNING")
        code, _ = await asyncio.wait_for(rest.call("DELETE", f"/connectors/{name}"), 30)
        assert code == 204
        assert (await rest.call("GET", "/connectors"))[1] == []


def test_metric_helper_reads_labelled_samples():
    text = 'x_total{connector="c",task="1"} 3.0\nx_total{connector="c",task="0"} 1.0\n'
    assert metric(text, "x_total", connector="c", task="1") == 3.0
    assert metric(text, "x_total", connector="d") == 0.0
    assert re.search("x_total", text)
