"""``mirrorline reconcile`` and ``--exact`` failover against real clusters A and B and real Spark.

A topic is mirrored with ``mirrorline mm2``; then the test plants faults on B (records deleted
with DeleteRecords, records produced twice, two records copied in swapped order, records never
copied) and checks that reconcile reports exactly the figures a plain-Python matcher computes
from both clusters, that the stored offset map sends every source record to its copy, and that
``failover --exact`` with A unreachable commits each group position at the copy of its next
record. Each ``mirrorline`` command runs in a subprocess (one SparkContext per process).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections import defaultdict

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from mirrorline.connectors.mirror_client.formats import Checkpoint
from mirrorline.connectors.mm2.offset_map import MapReader, offset_map_topic
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.distributed import free_port
from support.kafka import commit_on, create_topic, group_offsets, produce, read_all
from support.mm2 import isolated_state, start_mm2, stop_mm2

pytestmark = pytest.mark.integration
pytest.importorskip("pyspark")

PARTITIONS = 3
PER_PARTITION = 200
#: records on B's remote topic before mirroring starts, per partition: the map is not the identity
FOREIGN = {0: 3, 1: 0, 2: 7}
#: the group's committed offsets on A (its next record), per partition
GROUP_AT = {0: 50, 1: 120, 2: 199}
SPARK = ["--spark-conf", "spark.master=local[2]", "--spark-conf", "spark.ui.enabled=false",
         "--spark-conf", "spark.driver.memory=1g"]


def cli(*args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``mirrorline ARGS`` and return its result."""
    return subprocess.run([sys.executable, "-m", "mirrorline.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def content(record) -> tuple:
    """What mirroring keeps of a record."""
    return record.key, record.value, tuple(record.headers or ()), record.timestamp


def truth(source: list, target: list) -> dict:
    """Plain-Python reconciliation of one partition: the k-th target record with some content is the copy
    of the k-th source record with that content."""
    waiting = defaultdict(list)
    for record in target:
        waiting[content(record)].append(record.offset)
    pairs, missing = {}, []
    for record in source:
        copies = waiting[content(record)]
        if copies:
            pairs[record.offset] = copies.pop(0)
        else:
            missing.append(record.offset)
    seen: dict[tuple, int] = defaultdict(int)
    duplicated = unexpected = 0
    leftover = {o for offsets in waiting.values() for o in offsets}
    for record in target:  # a leftover repeating an earlier target record is a duplicate
        if record.offset in leftover:
            duplicated += 1 if seen[content(record)] else 0
            unexpected += 0 if seen[content(record)] else 1
        seen[content(record)] += 1
    ordered = sorted(pairs.items())
    last = max(pairs, default=-1)
    return {"pairs": pairs, "source": len(source), "target": len(target), "matched": len(pairs),
            "missing": len(missing), "missing_tail": sum(1 for o in missing if o > last), "duplicated": duplicated,
            "unexpected": unexpected, "out_of_order": sum(1 for a, b in zip(ordered, ordered[1:]) if b[1] < a[1])}


def properties(a: str, b: str, topic: str, state: str) -> str:
    return f"""clusters = A, B
A.bootstrap.servers = {a}
B.bootstrap.servers = {b}
A->B.enabled = true
A->B.topics = {topic}
B->A.enabled = false
groups = {state}-.*
emit.heartbeats.enabled = false
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5
emit.checkpoints.interval.seconds = 1
refresh.groups.interval.seconds = 1
A.offset.flush.interval.ms = 500
{isolated_state(state)}"""


async def wait_for(condition, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.5)


async def checkpoints_of(b: str, group: str) -> dict[int, Checkpoint]:
    records = (await read_all(b, "A.checkpoints.internal")).get(0, [])
    out = {}
    for record in records:
        checkpoint = Checkpoint.decode(record.key, record.value)
        if checkpoint.group == group:
            out[checkpoint.partition] = checkpoint
    return out


async def mirror_and_plant(a: str, b: str, topic: str, group: str, props, workdir) -> None:
    remote = f"A.{topic}"
    await create_topic(a, topic, PARTITIONS)
    await create_topic(b, remote, PARTITIONS)
    await produce(b, remote, [(p, b"foreign", f"foreign-{i}".encode(), [], None)
                              for p, n in FOREIGN.items() for i in range(n)])
    now = int(time.time() * 1000)
    records = []
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            key = None if i % 17 == 0 else f"k{i % 40}".encode()
            headers = [("n", str(i).encode())] if i % 3 else []
            records.append((p, key, f"order-{p}-{i}".encode(), headers, now + i // 10))
    records[PER_PARTITION + 101] = records[PER_PARTITION + 100]  # p1: two identical source records
    await produce(a, topic, records)
    mm2 = start_mm2(props, workdir / "mm2.log")
    try:
        async def copied() -> bool:
            ends = {p: len(rs) for p, rs in (await read_all(b, remote)).items()}
            return all(ends.get(p, 0) == FOREIGN[p] + PER_PARTITION for p in range(PARTITIONS))
        await wait_for(copied, "the mirror to copy every record")
        await commit_on(a, group, {TopicPartition(topic, p): n for p, n in GROUP_AT.items()})

        async def checkpointed() -> bool:
            seen = await checkpoints_of(b, group)
            return all(seen.get(p) and seen[p].upstream_offset == n for p, n in GROUP_AT.items())
        await wait_for(checkpointed, f"checkpoints of {group}")
    finally:
        assert stop_mm2(mm2) == 0
    # faults: p0 loses the copies of source 0..19 (and the foreign records before them)
    admin = AIOKafkaAdminClient(bootstrap_servers=b)
    await admin.start()
    try:
        await admin.delete_records({TopicPartition(remote, 0): RecordsToDelete(FOREIGN[0] + 20)})
    finally:
        await admin.close()
    source = await read_all(a, topic)
    # p1: records 10, 11, 12 copied a second time
    await produce(b, remote, [(1, r.key, r.value, list(r.headers), r.timestamp) for r in source[1][10:13]])
    # p2: five more records on A; B gets only two of them, in swapped order
    await produce(a, topic, [(2, b"late", f"late-{i}".encode(), [], now + 100) for i in range(5)])
    late = (await read_all(a, topic))[2][PER_PARTITION:]
    await produce(b, remote, [(2, r.key, r.value, list(r.headers), r.timestamp) for r in (late[1], late[0])])


@pytest.fixture(scope="module")
def planted(cluster_a, cluster_b, tmp_path_factory):
    """A mirrored topic with planted faults; the reconcile run; what the clusters hold (read independently)."""
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    workdir = tmp_path_factory.mktemp("reconcile")
    state = f"rc{uuid.uuid4().hex[:8]}"
    topic, group = f"{state}-orders", f"{state}-app"
    props = workdir / "mm2.properties"
    props.write_text(properties(a, b, topic, state))
    asyncio.run(mirror_and_plant(a, b, topic, group, props, workdir))
    before = cli("offsets", "translate", "--group", group, "--source", "A", "--target-bootstrap", b, "--exact")
    t = time.monotonic()
    result = cli("reconcile", str(props), "--flow", "A->B", "--topics", topic, "--json", *SPARK)
    seconds = time.monotonic() - t

    async def read_both():
        return await read_all(a, topic), await read_all(b, f"A.{topic}"), await read_all(b, offset_map_topic("A"))
    source, target, maps = asyncio.run(read_both())
    expected = {p: truth(source[p], target[p]) for p in range(PARTITIONS)}
    return dict(a=a, b=b, topic=topic, group=group, workdir=workdir, props=props, before=before, result=result,
                seconds=seconds, expected=expected, maps=maps)


def test_reconcile_reports_exactly_the_planted_faults(planted):
    result, expected = planted["result"], planted["expected"]
    assert result.returncode == 3, result.stderr[-3000:]  # records are missing
    summary = json.loads(result.stdout)
    print(f"reconcile took {planted['seconds']:.1f} s (job {summary['seconds']} s)")
    assert summary["flow"] == "A->B"
    by_partition = {p["partition"]: p for p in summary["partitions"]}
    assert set(by_partition) == set(range(PARTITIONS))
    figures = ("source", "target", "matched", "missing", "missing_tail", "duplicated", "unexpected", "out_of_order")
    for p, want in expected.items():
        assert {k: by_partition[p][k] for k in figures} == {k: want[k] for k in figures}, p
        assert by_partition[p]["topic"] == planted["topic"]
        assert by_partition[p]["target_topic"] == f"A.{planted['topic']}"
    # the planted faults, as planted
    assert (expected[0]["missing"], expected[0]["missing_tail"], expected[0]["unexpected"]) == (20, 0, 0)
    assert (expected[1]["duplicated"], expected[1]["missing"]) == (3, 0)
    assert (expected[2]["missing"], expected[2]["missing_tail"], expected[2]["out_of_order"]) == (3, 3, 1)
    assert expected[2]["unexpected"] == FOREIGN[2]
    assert by_partition[0]["first_missing"] == 0 and by_partition[0]["last_missing"] == 19
    assert summary["totals"]["missing"] == 23 and summary["map"]["stored"]


def test_stored_map_sends_every_source_record_to_its_copy(planted):
    reader = MapReader()
    for record in planted["maps"][0]:
        reader.add(record.key, record.value)
    maps = {m.partition: m for m in reader.maps() if m.source_topic == planted["topic"]}
    assert set(maps) == set(range(PARTITIONS))
    for p, want in planted["expected"].items():
        pmap = maps[p]
        assert {s: pmap.target_of(s) for s in want["pairs"]} == want["pairs"]
        assert len(pmap.runs) <= 3  # a handful of runs, not one row per record


def test_exact_failover_with_the_source_gone(planted):
    before = planted["before"]
    assert before.returncode == 1 and "mirrorline reconcile" in before.stderr, before.stderr

    group, b, expected = planted["group"], planted["b"], planted["expected"]
    remote = f"A.{planted['topic']}"
    # truth: the copy of the group's next record N on each partition
    exact = {p: expected[p]["pairs"][n] for p, n in GROUP_AT.items()}
    assert exact == {p: FOREIGN[p] + n for p, n in GROUP_AT.items()}

    translate = cli("offsets", "translate", "--group", group, "--source", "A", "--target-bootstrap", b, "--exact")
    assert translate.returncode == 0, translate.stderr
    for p, position in exact.items():
        assert any(line.split()[:3] == [f"{remote}-{p}", str(GROUP_AT[p]), str(position)]
                   for line in translate.stdout.splitlines()), translate.stdout

    one_group = cli("failover", "--group", group, "--source", "A", "--target-bootstrap", b, "--exact", "--dry-run")
    assert one_group.returncode == 0 and "dry run" in one_group.stdout, one_group.stderr
    for p, position in exact.items():
        assert any(line.split()[:3] == [f"{remote}-{p}", str(GROUP_AT[p]), str(position)]
                   for line in one_group.stdout.splitlines()), one_group.stdout

    dead = planted["workdir"] / "dead-a.properties"
    dead.write_text(planted["props"].read_text().replace(planted["a"], f"127.0.0.1:{free_port()}"))
    checkpoints = asyncio.run(checkpoints_of(b, group))
    failover = cli("failover", str(dead), "--flow", "A->B", "--groups", group, "--exact")
    assert failover.returncode == 0, failover.stdout + failover.stderr
    committed = asyncio.run(group_offsets(b, group))
    assert {tp.partition: o for tp, o in committed.items() if tp.topic == remote} == exact
    # MM2's checkpoints would have made the group read records again
    rereads = {p: exact[p] - checkpoints[p].downstream_offset for p in exact}
    print(f"re-reads avoided per partition (checkpoint vs exact): {rereads}")
    assert all(r >= 0 for r in rereads.values()) and sum(rereads.values()) > 0


def test_bad_input_is_one_line(planted):
    unknown = cli("reconcile", str(planted["props"]), "--flow", "A->B", "--topics", "no-such-topic")
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert unknown.stderr.strip().count("\n") == 0 and "no topic of cluster A matches" in unknown.stderr
    flow = cli("reconcile", str(planted["props"]), "--flow", "A->C")
    assert flow.returncode == 1 and "unknown cluster alias" in flow.stderr and flow.stderr.strip().count("\n") == 0


def test_reconcile_on_a_standalone_spark_cluster(planted, spark_standalone):
    result = cli("reconcile", str(planted["props"]), "--flow", "A->B", "--topics", planted["topic"], "--no-store",
                 "--spark-master", spark_standalone.master_url, "--spark-conf", "spark.ui.enabled=false",
                 "--spark-conf", "spark.executor.memory=1g", env={"SPARK_LOCAL_IP": "127.0.0.1"})
    assert result.returncode == 3, result.stderr[-3000:]
    out = result.stdout
    for p, want in planted["expected"].items():
        row = next(line for line in out.splitlines() if line.strip().strip("│┃|").strip().startswith(
            f"{planted['topic']}-{p} "))
        numbers = [int(x) for x in row.replace("│", " ").replace("┃", " ").split() if x.isdigit()]
        assert numbers[:7] == [want[k] for k in ("source", "target", "missing", "missing_tail", "duplicated",
                                                 "unexpected", "out_of_order")], row
    assert "23 source record(s) missing" in out and "not stored" in out
