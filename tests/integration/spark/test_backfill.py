"""``mirrorline backfill``: Spark copies a flow's history, then ``mirrorline mm2`` streams on exactly.

Real clusters A and B (broker defaults), Spark embedded (``local[2]``, ``local[1]``) and one run
on a real standalone cluster (master + two workers). The CLI runs in subprocesses: one
SparkContext per process, and a SIGKILL must hit a real driver.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.kafka import KEEP_OLD_RECORDS, commit_on, create_topic, produce, read_all, record_tuples
from support.mm2 import isolated_state, start_mm2, stop_mm2

from mirrorline.connectors.mirror_client.formats import Checkpoint, OffsetSync

pytestmark = pytest.mark.integration

BASE_TS = 1_700_000_000_000


def records(partitions: int, per_partition: int, size: int = 100, first: int = 0):
    """``(partition, key, value, headers, timestamp)``: distinct content, some nulls, some headers."""
    out = []
    for p in range(partitions):
        for i in range(first, first + per_partition):
            key = None if i % 17 == 0 else f"k{p}-{i}".encode()
            value = None if i % 29 == 5 else (f"v{p}-{i}-".encode() * (size // 8 + 1))[:size]
            headers = [("n", str(i).encode()), ("empty", b"")] if i % 3 == 0 else []
            out.append((p, key, value, headers, BASE_TS + p * 1_000_000 + i))
    return out


def write_properties(path, cluster_a, cluster_b, topic: str, state: str, extra: str = "") -> None:
    """An mm2.properties with flow A->B for ``topic``, internal state of its own, fast checkpoints."""
    path.write_text(f"""clusters = A, B
A.bootstrap.servers = {cluster_a.bootstrap_servers}
B.bootstrap.servers = {cluster_b.bootstrap_servers}
A->B.enabled = true
A->B.topics = {topic}
A->B.tasks.max = 2
B->A.enabled = false
{SINGLE_BROKER_MM2_PROPERTIES}{isolated_state(state)}offset.storage.partitions = 5
refresh.topics.interval.seconds = 2
refresh.groups.interval.seconds = 2
emit.checkpoints.interval.seconds = 1
sync.group.offsets.enabled = false
B.offset.flush.interval.ms = 500
spark.ui.enabled = false
spark.driver.memory = 1g
{extra}""")


def backfill(properties, *args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run ``mirrorline backfill PROPERTIES --flow A->B ARGS`` and wait for it."""
    return subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "backfill", str(properties), "--flow", "A->B",
                           *args], capture_output=True, text=True, timeout=timeout, env=env)


def summary_of(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


async def assert_exact_copy(cluster_a, cluster_b, topic: str, partitions: int, total: int) -> None:
    """Per partition the remote holds exactly the source's records, same offsets, same order, no extra."""
    source = await read_all(cluster_a.bootstrap_servers, topic, expect=total, timeout=60)
    target = await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=total, timeout=90)
    for p in range(partitions):
        assert len(target[p]) == len(source[p]), (p, len(target[p]), len(source[p]))
        assert record_tuples(target[p]) == record_tuples(source[p]), p
        assert [r.offset for r in target[p]] == [r.offset for r in source[p]], p


async def test_backfill_then_mm2_continues_exactly(cluster_a, cluster_b, unique_name, tmp_path):
    topic = unique_name("bf")
    await create_topic(cluster_a.bootstrap_servers, topic, 3, config=KEEP_OLD_RECORDS)
    history = records(3, 1500)
    await produce(cluster_a.bootstrap_servers, topic, history)
    group = unique_name("g")
    await commit_on(cluster_a.bootstrap_servers, group, {TopicPartition(topic, 0): 500})
    props = tmp_path / "mm2.properties"
    write_properties(props, cluster_a, cluster_b, topic, unique_name("st"), extra=f"A->B.groups = {group}\n")

    summary = summary_of(backfill(props, "--json", "--spark-conf", "spark.master=local[2]"))
    assert summary["records_written"] == 4500
    assert sorted((r["partition"], r["start"], r["end"], r["target_start"], r["target_end"])
                  for r in summary["ranges"]) == [(p, 0, 1500, 0, 1500) for p in range(3)]
    await assert_exact_copy(cluster_a, cluster_b, topic, 3, 4500)

    # offset syncs in MM2's bytes: one at least every offset.lag.max (100) downstream offsets, and the last
    syncs = await read_all(cluster_a.bootstrap_servers, "mm2-offset-syncs.B.internal", expect=1)
    mine = [s for s in (OffsetSync.decode(r.key, r.value) for r in syncs[0]) if s.topic == topic]
    for p in range(3):
        points = sorted((s.upstream_offset, s.downstream_offset) for s in mine if s.partition == p)
        assert points[0] == (0, 0) and points[-1] == (1499, 1499)
        assert all(u == d for u, d in points)
        assert max(b[1] - a[1] for a, b in zip(points, points[1:])) <= 100

    # a rerun finds every partition done and copies nothing
    again = summary_of(backfill(props, "--json", "--spark-conf", "spark.master=local[2]"))
    assert again["records_written"] == 0 and again["already_done"] == 3

    proc = start_mm2(props, tmp_path / "mm2.log")
    try:
        await produce(cluster_a.bootstrap_servers, topic, records(3, 200, first=1500))
        await assert_exact_copy(cluster_a, cluster_b, topic, 3, 5100)
        # the group at 500 on A (inside the backfilled range) translates through the backfill's syncs
        checkpoint = await wait_checkpoint(cluster_b, group, f"A.{topic}", 0)
        assert (checkpoint.upstream_offset, checkpoint.downstream_offset) == (500, 500)
    finally:
        code = stop_mm2(proc)
    assert code == 0, (tmp_path / "mm2.log").read_text()[-3000:]


async def wait_checkpoint(cluster_b, group: str, remote: str, partition: int, timeout: float = 60) -> Checkpoint:
    """The newest checkpoint of ``group`` for ``remote``-``partition`` in ``A.checkpoints.internal`` on B."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = await read_all(cluster_b.bootstrap_servers, "A.checkpoints.internal", timeout=5)
        except Exception:
            found = {}
        for records_ in found.values():
            matches = [c for c in (Checkpoint.decode(r.key, r.value) for r in records_)
                       if (c.group, c.topic, c.partition) == (group, remote, partition)]
            if matches:
                return matches[-1]
        await asyncio.sleep(1)
    raise AssertionError(f"no checkpoint for {group} on {remote}-{partition} within {timeout} s")


async def target_total(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        if topic not in await consumer.topics():
            return 0
        return sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()


async def test_backfill_killed_and_resumed_without_duplicates(cluster_a, cluster_b, unique_name, tmp_path):
    topic = unique_name("bfk")
    partitions, per_partition = 4, 30_000
    await create_topic(cluster_a.bootstrap_servers, topic, partitions, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, topic, records(partitions, per_partition, size=200))
    total = partitions * per_partition
    props = tmp_path / "mm2.properties"
    write_properties(props, cluster_a, cluster_b, topic, unique_name("st"))

    # one core: partitions are copied one after another, so the kill lands between two of them or in one
    proc = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "backfill", str(props), "--flow", "A->B",
                             "--json", "--spark-master", "local[1]"], stdout=subprocess.DEVNULL,
                            stderr=open(tmp_path / "killed.log", "w"), start_new_session=True)
    held = 0
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and proc.poll() is None:
        held = await target_total(cluster_b.bootstrap_servers, f"A.{topic}", partitions)
        if held >= total * 0.3:
            break
        await asyncio.sleep(0.2)
    assert proc.poll() is None, "the backfill ended before it could be killed: " + (tmp_path / "killed.log").read_text()
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, as a crash would
    proc.wait()
    at_kill = await target_total(cluster_b.bootstrap_servers, f"A.{topic}", partitions)
    assert 0 < at_kill < total

    summary = summary_of(backfill(props, "--json", "--spark-master", "local[2]"))
    assert summary["resumed"] == partitions
    assert summary["records_written"] == total - at_kill  # nothing already on B was written again
    await assert_exact_copy(cluster_a, cluster_b, topic, partitions, total)


async def test_bad_input_is_one_clear_line(cluster_a, cluster_b, unique_name, tmp_path):
    topic = unique_name("bfbad")
    await create_topic(cluster_a.bootstrap_servers, topic, 2, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, topic, records(2, 50))
    props = tmp_path / "mm2.properties"
    write_properties(props, cluster_a, cluster_b, topic, unique_name("st"))

    def one_line(result: subprocess.CompletedProcess, *expected: str) -> None:
        assert result.returncode != 0, result.stdout
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
        for text in expected:
            assert text in lines[0], lines[0]

    one_line(backfill(props, "--topics", "nope-.*"), "unknown topic", "nope-.*")
    one_line(backfill(props, "--from", "offset:50"), "empty range")
    one_line(backfill(props, "--from", "yesterday"), "--from", "offset:N")

    # records deleted by retention below the range's start: named, or counted with --allow-gaps
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster_a.bootstrap_servers)
    await admin.start()
    try:
        await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(10)}, timeout_ms=10_000)
    finally:
        await admin.close()
    one_line(backfill(props, "--from", "offset:0"), f"{topic}-0", "log starts at 10", "--allow-gaps")

    # the environment: no pyspark, no Java, an unreachable master (each before any record is written)
    no_pyspark = tmp_path / "no_pyspark"
    no_pyspark.mkdir()
    (no_pyspark / "pyspark.py").write_text("raise ImportError('hidden for the test')\n")
    env = {**os.environ, "PYTHONPATH": f"{no_pyspark}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    one_line(backfill(props, env=env), "pip install 'mirrorline[spark]'")
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "nojava"), "PATH": "/nonexistent"}
    one_line(backfill(props, env=env), "Java 17")
    one_line(backfill(props, "--spark-master", "spark://127.0.0.1:9"), "spark://127.0.0.1:9", "unreachable")


async def test_streaming_from_latest_then_backfill_is_refused(cluster_a, cluster_b, unique_name, tmp_path):
    """Streaming that started at `latest` owns the remote partition: an older range is refused, not interleaved."""
    topic = unique_name("bflate")
    await create_topic(cluster_a.bootstrap_servers, topic, 1, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, topic, records(1, 100))
    props = tmp_path / "mm2.properties"
    write_properties(props, cluster_a, cluster_b, topic, unique_name("st"),
                     extra="A->B.consumer.auto.offset.reset = latest\n")
    proc = start_mm2(props, tmp_path / "mm2.log")
    try:
        deadline = time.monotonic() + 60
        while await target_total(cluster_b.bootstrap_servers, f"A.{topic}", 1) == 0:
            await produce(cluster_a.bootstrap_servers, topic, records(1, 5, first=100))
            assert time.monotonic() < deadline, (tmp_path / "mm2.log").read_text()[-3000:]
            await asyncio.sleep(2)
    finally:
        stop_mm2(proc)
    before = await target_total(cluster_b.bootstrap_servers, f"A.{topic}", 1)
    result = backfill(props)
    assert result.returncode != 0
    assert "MirrorSource has already streamed" in result.stderr or "already holds records" in result.stderr, \
        result.stderr[-2000:]
    assert await target_total(cluster_b.bootstrap_servers, f"A.{topic}", 1) == before


async def test_backfill_on_standalone_cluster(cluster_a, cluster_b, unique_name, tmp_path, spark_standalone):
    topic = unique_name("bfsa")
    await create_topic(cluster_a.bootstrap_servers, topic, 4, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, topic, records(4, 2000))
    props = tmp_path / "mm2.properties"
    write_properties(props, cluster_a, cluster_b, topic, unique_name("st"))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    summary = summary_of(backfill(props, "--json", "--spark-master", spark_standalone.master_url,
                                  "--spark-conf", "spark.executor.memory=512m", env=env))
    assert summary["records_written"] == 8000
    await assert_exact_copy(cluster_a, cluster_b, topic, 4, 8000)
