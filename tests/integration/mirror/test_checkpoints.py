"""Consumer-group offset translation (MirrorCheckpointConnector) against real clusters A and B."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.errors import GroupCoordinatorNotAvailableError

from mirrorline.api import TopicPartition as Partition
from mirrorline.connectors.mirror_client.client import MirrorClient, reread_count
from mirrorline.connectors.mirror_client.formats import Checkpoint
from mirrorline.clients.kafka_admin import alter_consumer_group_offsets
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from support.kafka import commit_on, create_topic, produce, read_all
from support.worker import Rest, running_standalone

pytestmark = pytest.mark.integration

PARTITIONS = 3
PER_PARTITION = 100


def checkpoint_config(flow_config, prefix: str, **overrides) -> dict[str, str]:
    return flow_config(connector_class="MirrorCheckpointConnector", groups=f"{prefix}.*",
                       topics=f"{prefix}.*", tasks_max=1, **{
                           "emit.checkpoints.interval.seconds": 1, "sync.group.offsets.enabled": "true",
                           "sync.group.offsets.interval.seconds": 1, "refresh.groups.interval.seconds": 1,
                           "checkpoints.topic.replication.factor": 1, **overrides})



async def group_offsets(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return {tp: om.offset for tp, om in (await admin.list_consumer_group_offsets(group)).items()}
    finally:
        await admin.close()


async def wait_for_group(bootstrap, group, predicate, timeout=45.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            offsets = await group_offsets(bootstrap, group)
        except GroupCoordinatorNotAvailableError:  # a fresh cluster creates __consumer_offsets first
            offsets = {}
        if predicate(offsets):
            return offsets
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"group {group} on {bootstrap} never reached the expected offsets: {offsets}")
        await asyncio.sleep(0.5)


async def fill(cluster, topic: str) -> None:
    await create_topic(cluster.bootstrap_servers, topic, PARTITIONS)
    await produce(cluster.bootstrap_servers, topic, [
        (p, f"{p}-{i}".encode(), f"value {p}-{i}".encode(), [("seq", str(i).encode())], None)
        for i in range(PER_PARTITION) for p in range(PARTITIONS)])


@pytest.fixture
async def mirrored(cluster_a, cluster_b, flow_config, unique_name, tmp_path):
    """A topic on A mirrored to B with offset.lag.max=10, plus a running checkpoint connector."""
    prefix = unique_name("cp")
    topic = f"{prefix}-orders"
    await fill(cluster_a, topic)
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json"), "offset.flush.interval.ms": "500"}
    connectors = [{"name": f"{prefix}-source", **flow_config(topics=f"{prefix}.*", offset_lag_max=10)},
                  {"name": f"{prefix}-checkpoint", **checkpoint_config(flow_config, prefix)}]
    return prefix, topic, worker, connectors


async def test_group_fails_over_to_b_without_skipping(cluster_a, cluster_b, mirrored):
    prefix, topic, worker, connectors = mirrored
    group = f"{prefix}-app"
    async with running_standalone(worker, connectors) as url, Rest(url) as rest:
        await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=PARTITIONS * PER_PARTITION)
        consumed = {TopicPartition(topic, p): 37 + 11 * p for p in range(PARTITIONS)}
        await commit_on(cluster_a.bootstrap_servers, group, consumed)
        remote = {TopicPartition(f"A.{topic}", tp.partition): o for tp, o in consumed.items()}
        on_b = await wait_for_group(cluster_b.bootstrap_servers, group, lambda o: set(o) == set(remote))

        # translated, and never past the real position (a consumer must not skip a record)
        for tp, offset in on_b.items():
            assert 0 <= offset <= remote[tp], (tp, offset)

        # the checkpoints topic holds MM2's bytes for this group
        records = await read_all(cluster_b.bootstrap_servers, "A.checkpoints.internal")
        mine = [Checkpoint.decode(r.key, r.value) for r in records[0]]
        mine = [c for c in mine if c.group == group]
        assert {(c.topic, c.partition) for c in mine} == {(tp.topic, tp.partition) for tp in remote}
        assert {c.upstream_offset for c in mine} == set(consumed.values())

        # MirrorClient reads the same translation from B alone
        async with MirrorClient({"bootstrap.servers": cluster_b.bootstrap_servers}, KAFKA_CLIENTS) as client:
            translated = await client.translate_offsets(group, "A")
            assert {tp: om.offset for tp, om in translated.items()} == on_b

        # a consumer on B in the same group reads every record after its position on A
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster_b.bootstrap_servers, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.subscribe([f"A.{topic}"])
            seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
            deadline = asyncio.get_running_loop().time() + 30
            while sum(map(len, seen.values())) < sum(PER_PARTITION - o for o in consumed.values()) \
                    and asyncio.get_running_loop().time() < deadline:
                for tp, batch in (await consumer.getmany(timeout_ms=1000)).items():
                    seen[tp.partition].extend(int(dict(r.headers)["seq"]) for r in batch)
        finally:
            await consumer.stop()
        rereads = 0
        for tp, position in consumed.items():
            numbers = seen[tp.partition]
            assert set(range(position, PER_PARTITION)) <= set(numbers), f"partition {tp.partition} skipped records"
            rereads += len([n for n in numbers if n < position])

        # the exact re-read count from MirrorClient's helper agrees with what the consumer re-read
        source = KAFKA_CLIENTS.consumer({"bootstrap.servers": cluster_a.bootstrap_servers})
        target = KAFKA_CLIENTS.consumer({"bootstrap.servers": cluster_b.bootstrap_servers})
        await source.start()
        await target.start()
        try:
            exact = 0
            for tp, position in consumed.items():
                remote_tp = TopicPartition(f"A.{topic}", tp.partition)
                exact += await reread_count(source, Partition(*tp), position, target, Partition(*remote_tp),
                                            on_b[remote_tp])
        finally:
            await source.stop()
            await target.stop()
        assert exact == rereads
        print(f"\nfailover of {group}: no record skipped, {rereads} records re-read over {PARTITIONS} partitions")
        status, metrics_text = await rest.call("GET", "/metrics")
        assert f'kafka_connect_mirror_checkpoint_connector_failover_reread_records{{group="{group}"' in metrics_text


async def test_active_groups_are_not_touched_and_offsets_never_go_backwards(cluster_a, cluster_b, mirrored):
    prefix, topic, worker, connectors = mirrored
    active, ahead = f"{prefix}-active", f"{prefix}-ahead"
    remote_tp = TopicPartition(f"A.{topic}", 0)
    # 'ahead' already consumed further on B than its position on A
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster_b.bootstrap_servers)
    async with running_standalone(worker, connectors[:1]):
        await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=PARTITIONS * PER_PARTITION)
    await admin.start()
    try:
        await alter_consumer_group_offsets(admin, ahead, {remote_tp: 90})
    finally:
        await admin.close()
    member = AIOKafkaConsumer(bootstrap_servers=cluster_b.bootstrap_servers, group_id=active,
                              enable_auto_commit=False, auto_offset_reset="latest")
    await member.start()
    try:
        member.subscribe([f"A.{topic}"])
        await member.getmany(timeout_ms=3000)  # joined: the group is Stable on B
        await member.commit({remote_tp: 5})
        keep_alive = asyncio.create_task(_poll_forever(member))
        await commit_on(cluster_a.bootstrap_servers, active, {TopicPartition(topic, 0): 60})
        await commit_on(cluster_a.bootstrap_servers, ahead, {TopicPartition(topic, 0): 20})
        async with running_standalone(worker, connectors) as url, Rest(url) as rest:
            # wait until checkpoints for both groups exist, then give the sync several rounds
            await _wait_for_checkpoints(cluster_b, {active, ahead})
            await asyncio.sleep(4)
            assert (await group_offsets(cluster_b.bootstrap_servers, active))[remote_tp] == 5
            assert (await group_offsets(cluster_b.bootstrap_servers, ahead))[remote_tp] == 90
        keep_alive.cancel()
    finally:
        await member.stop()


async def _poll_forever(consumer):
    while True:
        await consumer.getmany(timeout_ms=500)


async def _wait_for_checkpoints(cluster_b, groups: set[str], timeout: float = 45.0, partitions: int = 1):
    """Wait until every group has checkpoints for at least ``partitions`` partitions."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        records = await read_all(cluster_b.bootstrap_servers, "A.checkpoints.internal")
        checkpoints = [Checkpoint.decode(r.key, r.value) for r in records.get(0, [])]
        found = {g for g in groups if len({(c.topic, c.partition) for c in checkpoints if c.group == g}) >= partitions}
        if groups <= found:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"no checkpoints for {groups - found}")


async def test_translation_survives_restart_and_handles_old_positions(cluster_a, cluster_b, flow_config,
                                                                     unique_name, tmp_path):
    prefix = unique_name("cr")
    topic = f"{prefix}-log"
    await fill(cluster_a, topic)
    # partition 0 starts at 40: positions before it precede every offset sync
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster_a.bootstrap_servers)
    await admin.start()
    try:
        await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(40)}, timeout_ms=10000)
    finally:
        await admin.close()
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json"), "offset.flush.interval.ms": "500"}
    connectors = [{"name": f"{prefix}-source", **flow_config(topics=f"{prefix}.*", offset_lag_max=10)},
                  {"name": f"{prefix}-checkpoint", **checkpoint_config(flow_config, prefix)}]
    behind, moving = f"{prefix}-behind", f"{prefix}-moving"
    remote = TopicPartition(f"A.{topic}", 0)
    async with running_standalone(worker, connectors):
        await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=PARTITIONS * PER_PARTITION - 40)
        await commit_on(cluster_a.bootstrap_servers, moving, {TopicPartition(topic, 0): 70})
        first = await wait_for_group(cluster_b.bootstrap_servers, moving, lambda o: remote in o)
    # 70 upstream is 30 downstream (the first 40 were deleted before mirroring)
    assert 0 <= first[remote] <= 30

    # restart the worker: translation of a new position is still right
    async with running_standalone(worker, connectors):
        await commit_on(cluster_a.bootstrap_servers, moving, {TopicPartition(topic, 0): 95})
        await commit_on(cluster_a.bootstrap_servers, behind, {TopicPartition(topic, 0): 10,
                                                              TopicPartition(topic, 1): 3})
        after = await wait_for_group(cluster_b.bootstrap_servers, moving, lambda o: o.get(remote, 0) > first[remote])
        behind_on_b = await wait_for_group(cluster_b.bootstrap_servers, behind,
                                           lambda o: TopicPartition(f"A.{topic}", 1) in o)
    assert first[remote] < after[remote] <= 55
    # the far-behind group on partition 1 (history kept) is translated without skipping...
    assert behind_on_b[TopicPartition(f"A.{topic}", 1)] <= 3
    # ...and its position on partition 0 precedes every sync: no checkpoint, nothing written
    assert remote not in behind_on_b


def cli(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "mirrorline.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


async def test_translate_and_failover_commands(cluster_a, cluster_b, flow_config, unique_name, tmp_path):
    prefix = unique_name("fo")
    topic = f"{prefix}-orders"
    await fill(cluster_a, topic)
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers, "offset.flush.interval.ms": "500"}
    connectors = [{"name": f"{prefix}-source", **flow_config(topics=f"{prefix}.*", offset_lag_max=10)},
                  {"name": f"{prefix}-checkpoint", **checkpoint_config(
                      flow_config, prefix, **{"sync.group.offsets.enabled": "false"})}]
    group = f"{prefix}-app"
    consumed = {TopicPartition(topic, p): 50 for p in range(PARTITIONS)}
    async with running_standalone(worker, connectors):
        await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=PARTITIONS * PER_PARTITION)
        await commit_on(cluster_a.bootstrap_servers, group, consumed)
        await _wait_for_checkpoints(cluster_b, {group}, partitions=PARTITIONS)
    common = ["--group", group, "--source", "A", "--target-bootstrap", cluster_b.bootstrap_servers,
              "--source-bootstrap", cluster_a.bootstrap_servers]

    translated = cli("offsets", "translate", *common)
    assert translated.returncode == 0, translated.stderr
    assert f"group {group} on the target: Dead" in translated.stdout
    rows = [line.split() for line in translated.stdout.splitlines() if line.startswith(f"A.{topic}-")]
    assert len(rows) == PARTITIONS and all(row[1] == "50" for row in rows), translated.stdout
    assert all(row[4].isdigit() for row in rows), f"a re-read count is unknown:\n{translated.stdout}"
    reread = sum(int(row[4]) for row in rows)
    assert f"would read {reread} record(s) again and skip none" in translated.stdout

    dry = cli("failover", *common, "--dry-run")
    assert dry.returncode == 0 and "dry run: would commit 3 offset(s)" in dry.stdout, dry.stdout + dry.stderr
    assert not await _group_exists(cluster_b.bootstrap_servers, group)

    done = cli("failover", *common)
    assert done.returncode == 0 and "committed 3 offset(s)" in done.stdout, done.stdout + done.stderr
    on_b = await group_offsets(cluster_b.bootstrap_servers, group)
    assert {tp.partition: o for tp, o in on_b.items()} == {int(row[0].rsplit("-", 1)[1]): int(row[2]) for row in rows}

    # a live member on the target: refused, one readable line, nothing changed
    member = AIOKafkaConsumer(bootstrap_servers=cluster_b.bootstrap_servers, group_id=group, enable_auto_commit=False)
    await member.start()
    try:
        member.subscribe([f"A.{topic}"])
        await member.getmany(timeout_ms=3000)
        refused = cli("failover", *common)
        assert refused.returncode == 1
        assert refused.stderr.strip().splitlines()[-1].startswith(f"mirrorline: error: group {group} is Stable")
    finally:
        await member.stop()


async def _group_exists(bootstrap, group) -> bool:
    try:
        return bool(await group_offsets(bootstrap, group))
    except GroupCoordinatorNotAvailableError:
        return False
