"""A sink connector survives rebalances with no loss: tasks.max=2 on distributed workers, one leaves
and another joins while records are being produced.

The FileStreamSink of every task appends to one file (``O_APPEND``, one write per batch), so the
file is the union of what the tasks wrote. At-least-once: every produced record is there; a
record may be there twice (written, then re-delivered after a rebalance before its commit).
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from support.distributed import WorkerCluster, tasks_per_worker, wait_for_status
from support.kafka import create_topic, group_offsets
from support.worker import Rest

pytestmark = pytest.mark.integration

PARTITIONS = 4
BATCHES = 60
BATCH = 50


async def produce_slowly(bootstrap: str, topic: str, sent: list[bytes]) -> None:
    """Produce BATCHES x BATCH distinct values over a few seconds, round-robin over the partitions."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        for batch in range(BATCHES):
            futures = []
            for i in range(BATCH):
                value = f"r-{batch}-{i}".encode()
                futures.append(await producer.send(topic, value, partition=(batch * BATCH + i) % PARTITIONS))
                sent.append(value)
            await asyncio.gather(*futures)
            await asyncio.sleep(0.1)
    finally:
        await producer.stop()


def running_on(workers: int, tasks: int = 2):
    """Status predicate: ``tasks`` tasks RUNNING on exactly ``workers`` workers."""
    def check(status: dict) -> bool:
        return (len(status["tasks"]) == tasks and all(t["state"] == "RUNNING" for t in status["tasks"])
                and len(tasks_per_worker(status)) == workers)
    return check


async def test_sink_tasks_lose_nothing_when_a_worker_leaves_and_one_joins(cluster_a, unique_name, tmp_path):
    bootstrap = cluster_a.bootstrap_servers
    topic, name = unique_name("sinkrb"), unique_name("filesink")
    await create_topic(bootstrap, topic, PARTITIONS)
    sink_file = Path(tmp_path) / "sink.txt"
    cluster = WorkerCluster(bootstrap, unique_name("dist"), tmp_path)
    try:
        for _ in range(2):
            cluster.add_worker()
        await cluster.wait_healthy()
        async with Rest(cluster.workers[0].url) as rest:
            config = {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic,
                      "tasks.max": "2"}
            status, body = await rest.call("POST", "/connectors", {"name": name, "config": config})
            assert status == 201, body
            await wait_for_status(rest, name, running_on(2))

            sent: list[bytes] = []
            producing = asyncio.create_task(produce_slowly(bootstrap, topic, sent))
            await asyncio.sleep(2.0)
            cluster.stop(cluster.workers[1])  # graceful: its task commits, closes and moves
            await wait_for_status(rest, name, running_on(1))
            await asyncio.sleep(1.0)
            cluster.add_worker()  # a third joins: the tasks spread again
            await cluster.wait_healthy()
            await wait_for_status(rest, name, running_on(2))
            await producing

            written = await wait_all_written(cluster, bootstrap, topic, name, sink_file, sent)
    finally:
        cluster.close()

    duplicates = check_written(written, sent)
    print(f"graceful: {len(sent)} records, {duplicates} written twice (re-delivered after a rebalance)")


async def test_sink_tasks_lose_nothing_when_a_worker_is_killed(cluster_a, unique_name, tmp_path):
    """SIGKILL: no commit, no close. The group gives the dead consumer's partitions to the survivor
    after its session timeout, from the last committed offsets: re-delivered, never skipped."""
    bootstrap = cluster_a.bootstrap_servers
    topic, name = unique_name("sinkkill"), unique_name("filesink")
    await create_topic(bootstrap, topic, PARTITIONS)
    sink_file = Path(tmp_path) / "sink.txt"
    cluster = WorkerCluster(bootstrap, unique_name("dist"), tmp_path)
    try:
        for _ in range(2):
            cluster.add_worker()
        await cluster.wait_healthy()
        async with Rest(cluster.workers[0].url) as rest:
            config = {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic,
                      "tasks.max": "2", "consumer.override.session.timeout.ms": "6000"}
            status, body = await rest.call("POST", "/connectors", {"name": name, "config": config})
            assert status == 201, body
            await wait_for_status(rest, name, running_on(2))
            sent: list[bytes] = []
            producing = asyncio.create_task(produce_slowly(bootstrap, topic, sent))
            await asyncio.sleep(2.5)
            cluster.stop(cluster.workers[1], signal.SIGKILL)
            await producing
            await wait_for_status(rest, name, running_on(1), timeout=60)
            written = await wait_all_written(cluster, bootstrap, topic, name, sink_file, sent)
    finally:
        cluster.close()
    duplicates = check_written(written, sent)
    print(f"SIGKILL: {len(sent)} records, {duplicates} written twice (re-delivered after the crash)")


async def wait_all_written(cluster: WorkerCluster, bootstrap: str, topic: str, name: str, sink_file: Path,
                           sent: list[bytes], timeout: float = 60.0) -> list[bytes]:
    """Wait until every sent record is in the file and the group committed the end of every partition."""
    expected = {(topic, p): BATCHES * BATCH // PARTITIONS for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout
    while True:
        written = sink_file.read_bytes().splitlines() if sink_file.exists() else []
        committed = {(tp.topic, tp.partition): o
                     for tp, o in (await group_offsets(bootstrap, f"connect-{name}")).items()}
        if set(written) >= set(sent) and committed == expected:
            return written
        assert time.monotonic() < deadline, (
            f"missing {len(set(sent) - set(written))} of {len(sent)} records; committed {committed}, "
            f"end offsets {expected}\n{cluster.logs()[-4000:]}")
        await asyncio.sleep(0.5)


def check_written(written: list[bytes], sent: list[bytes]) -> int:
    """Nothing lost, nothing invented, each partition's first copies in produce order; returns the duplicates."""
    assert len(sent) == BATCHES * BATCH
    assert set(written) == set(sent)

    def position(value: bytes) -> tuple[int, int]:
        _, batch, i = value.split(b"-")
        return int(batch), int(i)

    for p in range(PARTITIONS):  # at-least-once may repeat a tail, never reorder what came first
        firsts = list(dict.fromkeys(v for v in written if (position(v)[0] * BATCH + position(v)[1]) % PARTITIONS == p))
        assert firsts == sorted(firsts, key=position)
    return len(written) - len(set(written))
