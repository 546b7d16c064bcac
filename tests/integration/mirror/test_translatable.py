"""Every mirrored partition is translatable, and a failover never passes over one in silence (issue 23).

On real clusters A and B, broker defaults, `mirrorline mm2` run as a user runs it:

* the re-split case: a 4-partition backlog mirrored by 2 tasks that restart (re-split) after
  copying it, with MM2's default 60 s offset flush: every partition has offset syncs and every
  group a checkpoint at its exact position; a group with positions but no translation makes
  `failover --flow` refuse, naming it; `--allow-partial` commits every other partition exactly and
  reports the rest;
* the burst case with ``offset.lag.max = 0`` and group offset sync: each partition checkpointed at
  the group's position, a librdkafka consumer of the synced group on B reads nothing again; and
  the checkpoints follow the group through 10,000 more records and a rewind;
* ``emit.offset-syncs.enabled = false`` with flows both ways: both mirror, heartbeats flow, no
  offset-syncs topic and no checkpoint connector (one log line per flow).

The truth is computed independently from the records' contents; committed offsets on B are read
with librdkafka (confluent_kafka).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
import uuid
from collections import defaultdict

import pytest
from aiokafka import TopicPartition
from confluent_kafka import Consumer, TopicPartition as CTopicPartition

from mirrorline.connectors.mirror_client.formats import Checkpoint, Heartbeat, OffsetSync
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.kafka import commit_on, create_topic, produce, read_all, topics_of
from support.mm2 import isolated_state, start_mm2, stop_mm2

pytestmark = pytest.mark.integration

WAIT_S = 90


def cli(*args: str) -> subprocess.CompletedProcess:
    """Run ``mirrorline ARGS``."""
    return subprocess.run([sys.executable, "-m", "mirrorline.cli.main", *args], capture_output=True, text=True,
                          timeout=180)


async def until(what: str, check, timeout: float = WAIT_S, interval: float = 0.5):
    """Poll the coroutine function ``check`` until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s waiting for {what}"
        await asyncio.sleep(interval)


async def syncs_of(bootstrap: str, syncs_topic: str, topic: str) -> dict[int, list[OffsetSync]]:
    """The offset syncs of ``topic`` in the offset-syncs topic, by partition, in topic order."""
    out: dict[int, list[OffsetSync]] = defaultdict(list)
    for record in (await read_all(bootstrap, syncs_topic)).get(0, []):
        sync = OffsetSync.decode(record.key, record.value)
        if sync.topic == topic:
            out[sync.partition].append(sync)
    return out


async def checkpoints_of(bootstrap: str, topic: str, groups: set[str]) -> dict[tuple[str, int], Checkpoint]:
    """The newest checkpoint of each (group, partition) of ``groups`` in ``topic``."""
    latest = {}
    try:
        records = (await read_all(bootstrap, topic, timeout=5)).get(0, [])
    except AssertionError:  # not created yet
        return {}
    for record in records:
        checkpoint = Checkpoint.decode(record.key, record.value)
        if checkpoint.group in groups:
            latest[(checkpoint.group, checkpoint.partition)] = checkpoint
    return latest


def committed_on(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets on ``topic`` as librdkafka reads them (partitions without one left out)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([CTopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def base_properties(cluster_a, cluster_b, prefix: str, extra: str) -> str:
    return (f"clusters = A, B\nA.bootstrap.servers = {cluster_a.bootstrap_servers}\n"
            f"B.bootstrap.servers = {cluster_b.bootstrap_servers}\nA->B.enabled = true\nA->B.topics = {prefix}-.*\n"
            f"groups = {prefix}-.*\n{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5\n{extra}"
            f"{isolated_state(prefix)}")


# --------------------------------------------------------------------------- the re-split case

PARTITIONS, PER_PARTITION = 4, 5000
POSITIONS = {"g1": [1234, 1301, 2999, 4500], "g2": [4321, 17, 5000, 2500]}  # on A, per partition


async def test_resplit_after_a_backlog_leaves_every_partition_translatable(cluster_a, cluster_b, unique_name,
                                                                           tmp_path):
    prefix = unique_name("rs")
    topic, remote = f"{prefix}-orders", f"A.{prefix}-orders"
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    await create_topic(a, topic, PARTITIONS)
    await produce(a, topic, [(p, f"k{i}".encode(), f"{p}:{i}".encode(), [], None)
                             for p in range(PARTITIONS) for i in range(PER_PARTITION)])
    groups = {f"{prefix}-{name}": positions for name, positions in POSITIONS.items()}
    for group, positions in groups.items():
        await commit_on(a, group, {TopicPartition(topic, p): o for p, o in enumerate(positions)})
    properties = tmp_path / "mm2.properties"
    # MM2's default offset flush (60 s): the syncs must not wait for it
    properties.write_text(base_properties(cluster_a, cluster_b, prefix, "tasks.max = 2\n"
                                          "emit.checkpoints.interval.seconds = 2\n"
                                          "refresh.topics.interval.seconds = 2\n"))
    log = tmp_path / "mm2.log"
    mm2 = start_mm2(properties, log)
    try:
        copies = await read_all(b, remote, expect=PARTITIONS * PER_PARTITION, timeout=WAIT_S)
        assert sum(len(r) for r in copies.values()) == PARTITIONS * PER_PARTITION
        # a new topic: the connector re-splits its tasks, which restart after copying their partitions
        await create_topic(a, f"{prefix}-more", 1)
        await until("the re-split", lambda: _logged(log, "re-splitting tasks"))
        # the truth: the copy of the group's next record (values name their source offset)
        truth = {(g, p): next((r.offset for r in copies[p] if int(r.value.split(b":")[1]) >= o), len(copies[p]))
                 for g, positions in groups.items() for p, o in enumerate(positions)}

        async def all_exact():
            latest = await checkpoints_of(b, "A.checkpoints.internal", set(groups))
            return latest if all(k in latest and latest[k].downstream_offset == v for k, v in truth.items()) else None

        latest = await until("an exact checkpoint of every group on every partition", all_exact, timeout=60)
        syncs = await syncs_of(a, "mm2-offset-syncs.B.internal", topic)
        assert sorted(syncs) == list(range(PARTITIONS)), syncs
        # each partition's last sync is at its last record: the stopping tasks flushed theirs
        assert all(syncs[p][-1].upstream_offset == PER_PARTITION - 1 for p in range(PARTITIONS)), syncs
        assert all(c.upstream_offset == groups[g][p] for (g, p), c in latest.items())
    finally:
        assert stop_mm2(mm2) == 0, log.read_text()[-3000:]
    print(f"\nre-split: syncs per partition {[len(syncs[p]) for p in range(PARTITIONS)]}, "
          f"{len(latest)} of {len(truth)} checkpoints exact")

    # a third group moves on A while the mirror is stopped: no checkpoint translates it (and it is at 0 on the
    # empty topic, where nothing can be lost or read again)
    late = f"{prefix}-late"
    late_positions = [100, 200, 0, 400]
    await commit_on(a, late, {**{TopicPartition(topic, p): o for p, o in enumerate(late_positions)},
                              TopicPartition(f"{prefix}-more", 0): 0})
    refused = cli("failover", str(properties), "--flow", "A->B", "--groups", f"{prefix}-.*")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    names = ", ".join(f"{remote}-{p}" for p in range(PARTITIONS))
    assert last.startswith("mirrorline: error: no translation on B for 4 partition(s) with a position on A: "
                           f"group {late}: {names};"), last
    # the plan counts what those partitions would lose (latest) or re-read (earliest)
    skipped = sum(PER_PARTITION - o for o in late_positions)
    assert (f"without translation: 4 partition(s) of 1 group(s) with a position on A (listed below): at "
            f"auto.offset.reset=latest a consumer skips {skipped} record(s), at earliest it re-reads "
            f"{sum(late_positions)}") in refused.stdout, refused.stdout
    assert f"no translation needed: A.{prefix}-more-0 (position 0 on A)" in refused.stdout, refused.stdout
    assert all(not committed_on(b, g, remote, PARTITIONS) for g in groups), "a refused failover committed"

    done = cli("failover", str(properties), "--flow", "A->B", "--groups", f"{prefix}-.*", "--allow-partial")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"left without translation on B (--allow-partial; a consumer starts them at auto.offset.reset): " \
           f"group {late}: {names}" in done.stdout, done.stdout
    for group in groups:  # every partition of every group, exactly at the first unread record
        assert committed_on(b, group, remote, PARTITIONS) == {p: truth[(group, p)] for p in range(PARTITIONS)}
    assert not committed_on(b, late, remote, PARTITIONS)


def _logged(path, text: str):
    async def check():
        return path.exists() and text in path.read_text()
    return check()


# --------------------------------------------------------------------------- the burst case

BURST_PARTITIONS, BURST = 10, 50


async def test_burst_with_offset_lag_max_zero_translates_every_committed_position(cluster_a, cluster_b, unique_name,
                                                                                   tmp_path):
    prefix = unique_name("bu")
    topic, remote, group = f"{prefix}-orders", f"A.{prefix}-orders", f"{prefix}-app"
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    await create_topic(a, topic, BURST_PARTITIONS)
    properties = tmp_path / "mm2.properties"
    properties.write_text(base_properties(cluster_a, cluster_b, prefix, "offset.lag.max = 0\n"
                                          "sync.group.offsets.enabled = true\n"
                                          "sync.group.offsets.interval.seconds = 1\n"
                                          "emit.checkpoints.interval.seconds = 1\n"
                                          "refresh.groups.interval.seconds = 1\n"))
    log = tmp_path / "mm2.log"
    mm2 = start_mm2(properties, log)
    try:
        await until("the mirror tasks", lambda: _logged(log, "Task MirrorSourceConnector-0 mirrors"))
        produced = BURST
        await produce(a, topic, [(p, None, f"{p}:{i}".encode(), [], None)
                                 for i in range(BURST) for p in range(BURST_PARTITIONS)])
        await commit_on(a, group, {TopicPartition(topic, p): BURST for p in range(BURST_PARTITIONS)})
        began = time.monotonic()
        await _checkpointed_at(b, group, {p: BURST for p in range(BURST_PARTITIONS)})
        seconds = time.monotonic() - began
        synced = await until("the group synced on B", lambda: _synced(b, group, remote, BURST))
        assert synced == {p: BURST for p in range(BURST_PARTITIONS)}
        assert await asyncio.to_thread(reread_on_b, b, group, remote) == 0
        syncs = await syncs_of(a, "mm2-offset-syncs.B.internal", topic)
        assert all(syncs[p][-1].upstream_offset == BURST - 1 for p in range(BURST_PARTITIONS))
        print(f"\nburst: {sum(len(s) for s in syncs.values())} syncs for {BURST_PARTITIONS} x {BURST} records, every "
              f"partition checkpointed at the group's position {seconds:.1f} s after its commit")

        # 10,000 more records; the group at 90 %, then rewound to 10 %: the checkpoints follow exactly
        await produce(a, topic, [(p, None, f"{p}:{i}".encode(), [], None)
                                 for i in range(produced, produced + 1000) for p in range(BURST_PARTITIONS)])
        produced += 1000
        for position in (produced * 9 // 10, produced // 10):
            await commit_on(a, group, {TopicPartition(topic, p): position for p in range(BURST_PARTITIONS)})
            await _checkpointed_at(b, group, {p: position for p in range(BURST_PARTITIONS)})
    finally:
        assert stop_mm2(mm2) == 0, log.read_text()[-3000:]


async def _checkpointed_at(bootstrap: str, group: str, positions: dict[int, int]) -> None:
    """Until the group's checkpoints are at ``positions`` on A and the same offsets on B (B copies A 1:1)."""
    async def check():
        latest = await checkpoints_of(bootstrap, "A.checkpoints.internal", {group})
        return all((c := latest.get((group, p))) is not None and (c.upstream_offset, c.downstream_offset) == (o, o)
                   for p, o in positions.items())
    await until(f"checkpoints of {group} at {set(positions.values())}", check, timeout=60)


async def _synced(bootstrap: str, group: str, topic: str, position: int):
    committed = await asyncio.to_thread(committed_on, bootstrap, group, topic, BURST_PARTITIONS)
    return committed if len(committed) == BURST_PARTITIONS and min(committed.values()) >= position else None


def reread_on_b(bootstrap: str, group: str, topic: str) -> int:
    """Records a librdkafka consumer of ``group`` gets on B from its committed offsets (none committed: fail)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "error"})
    got = 0
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got += 1
    finally:
        consumer.close()
    return got


# --------------------------------------------------------------------------- emit.offset-syncs.enabled = false

async def test_without_offset_syncs_both_flows_mirror_with_heartbeats_and_no_checkpoints(cluster_a, cluster_b,
                                                                                         unique_name, tmp_path):
    prefix = unique_name("nos")
    tag = uuid.uuid4().hex[:6]
    east, west = f"E{tag}", f"W{tag}"  # aliases of this test only: the internal topics' names are its own
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    await create_topic(a, f"{prefix}-east", 2)
    await create_topic(b, f"{prefix}-west", 2)
    properties = tmp_path / "mm2.properties"
    properties.write_text(f"""clusters = {east}, {west}
{east}.bootstrap.servers = {a}
{west}.bootstrap.servers = {b}
{east}->{west}.enabled = true
{east}->{west}.topics = {prefix}-east
{west}->{east}.enabled = true
{west}->{east}.topics = {prefix}-west
emit.offset-syncs.enabled = false
emit.heartbeats.interval.seconds = 1
refresh.topics.interval.seconds = 2
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5
{east}.group.id = {prefix}-{west}-mm2
{west}.group.id = {prefix}-{east}-mm2
config.storage.topic = mm2-configs.{prefix}.internal
offset.storage.topic = mm2-offsets.{prefix}.internal
status.storage.topic = mm2-status.{prefix}.internal
""")
    log = tmp_path / "mm2.log"
    started_ms = int(time.time() * 1000)
    mm2 = start_mm2(properties, log)
    try:
        await produce(a, f"{prefix}-east", [(i % 2, None, f"e{i}".encode(), [], None) for i in range(100)])
        await produce(b, f"{prefix}-west", [(i % 2, None, f"w{i}".encode(), [], None) for i in range(100)])
        on_west = await read_all(b, f"{east}.{prefix}-east", expect=100, timeout=WAIT_S)
        on_east = await read_all(a, f"{west}.{prefix}-west", expect=100, timeout=WAIT_S)
        assert sorted(r.value for rs in on_west.values() for r in rs) == sorted(f"e{i}".encode() for i in range(100))
        assert sorted(r.value for rs in on_east.values() for r in rs) == sorted(f"w{i}".encode() for i in range(100))
        # heartbeats: each flow writes its own and mirrors the other's
        for bootstrap, topic, key in ((b, "heartbeats", (east, west)), (a, "heartbeats", (west, east)),
                                      (b, f"{east}.heartbeats", (west, east)), (a, f"{west}.heartbeats", (east, west))):
            await until(f"heartbeats {key} in {topic}", lambda: _heartbeat_after(bootstrap, topic, key, started_ms))
        lines = [line for line in log.read_text().splitlines() if "runs no MirrorCheckpointConnector" in line]
        assert len(lines) == 2 and all("emit.offset-syncs.enabled = false" in line for line in lines), lines
    finally:
        assert stop_mm2(mm2) == 0, log.read_text()[-3000:]
    for bootstrap, target in ((a, west), (b, east)):
        topics = await topics_of(bootstrap)
        assert f"mm2-offset-syncs.{target}.internal" not in topics
    assert f"{east}.checkpoints.internal" not in await topics_of(b)
    assert f"{west}.checkpoints.internal" not in await topics_of(a)
    assert "Traceback" not in log.read_text()


async def _heartbeat_after(bootstrap: str, topic: str, key: tuple[str, str], since_ms: int) -> bool:
    try:
        records = (await read_all(bootstrap, topic, timeout=5)).get(0, [])
    except AssertionError:
        return False
    beats = [Heartbeat.decode(r.key, r.value) for r in records]
    return any((h.source_cluster_alias, h.target_cluster_alias) == key and h.timestamp >= since_ms for h in beats)
