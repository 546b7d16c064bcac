"""Exact checkpoints (issue 13): ``mirrorline mm2`` translates consumer positions with 0 re-reads.

Clusters A and B, a 3-partition topic of a few thousand records mirrored A->B with MM2's default
``offset.lag.max`` (100), consumer groups committed on A at positions that are not sync points.
The truth is computed independently: every value names its source record, so reading B's remote
topic maps each downstream offset to the source offset it copies. Checkpoints must equal the
truth; MM2's own rule (the slots alone, computed from the same offset-syncs topic) must not, or the
test would not show anything. Runs on both copying paths (``batch.forwarding.enabled``).
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import TopicPartition

from mirrorline.connectors.mirror_client.formats import Checkpoint, OffsetSync
from mirrorline.connectors.mirror_client.offset_sync_store import OffsetSyncStore
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.kafka import commit_on, create_topic, produce, read_all
from support.mm2 import isolated_state, start_mm2, stop_mm2

pytestmark = pytest.mark.integration

PARTITIONS = 3
PER_PARTITION = 1500
# committed positions on A per group and partition: none of them is a multiple of offset.lag.max + 1
POSITIONS = {"early": (1, 37, 499), "late": (1234, PER_PARTITION, 777), "mixed": (1001, 250, 1499)}


def write_properties(path, cluster_a, cluster_b, prefix: str, batch_forwarding: str) -> None:
    """Flow A->B only, for the prefix's topic and groups, with short checkpoint intervals."""
    path.write_text(f"""clusters = A, B
A.bootstrap.servers = {cluster_a.bootstrap_servers}
B.bootstrap.servers = {cluster_b.bootstrap_servers}
A->B.enabled = true
A->B.topics = {prefix}-orders
A->B.batch.forwarding.enabled = {batch_forwarding}
groups = {prefix}-.*
tasks.max = 2
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5
emit.checkpoints.interval.seconds = 1
refresh.groups.interval.seconds = 1
B.offset.flush.interval.ms = 500
{isolated_state(prefix)}""")


def exact_positions(sources: list[int], position: int) -> set[int]:
    """Where a consumer that read the source up to ``position`` continues on B with 0 re-reads, 0 skips.

    ``sources`` holds the source offset of each record of the remote partition, in order. A valid
    position is the end of the log, or a copy of the next source record, such that every source
    record from ``position`` on still has a copy from there (one position unless records were copied twice).
    """
    last_copy = {s: d for d, s in enumerate(sources)}
    wanted = [s for s in sorted(last_copy) if s >= position]
    if not wanted:
        return {len(sources)}
    no_skip = min(last_copy[s] for s in wanted)  # starting later loses a record
    return {d for d in range(no_skip + 1) if sources[d] == wanted[0]}


async def latest_checkpoints(bootstrap: str, groups: set[str]) -> dict[tuple[str, int], Checkpoint]:
    """The newest checkpoint of each (group, partition) of ``groups`` in ``A.checkpoints.internal``."""
    latest = {}
    for record in (await read_all(bootstrap, "A.checkpoints.internal")).get(0, []):
        checkpoint = Checkpoint.decode(record.key, record.value)
        if checkpoint.group in groups:
            latest[(checkpoint.group, checkpoint.partition)] = checkpoint
    return latest


async def mm2_rule(bootstrap_a: str, topic: str) -> OffsetSyncStore:
    """MM2's translation for ``topic``, from the offset-syncs topic on A as a checkpoint task reads it."""
    store = OffsetSyncStore(initialization_must_read_to_end=False, max_runs=0)  # the slots alone
    for record in (await read_all(bootstrap_a, "mm2-offset-syncs.B.internal")).get(0, []):
        sync = OffsetSync.decode(record.key, record.value)
        if sync.topic == topic:
            store.update(sync)
    store.finish_initial_read()
    return store


@pytest.mark.parametrize("batch_forwarding", ["true", "false"])
async def test_checkpoints_are_exact_at_arbitrary_positions(cluster_a, cluster_b, unique_name, tmp_path,
                                                            batch_forwarding):
    prefix = unique_name("xc")
    topic, remote = f"{prefix}-orders", f"A.{prefix}-orders"
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    await create_topic(a, topic, PARTITIONS)
    for start in range(0, PER_PARTITION, 500):  # several produce rounds: several batches per partition
        await produce(a, topic, [(p, f"k{i}".encode(), f"{p}:{i}".encode(), [], None)
                                 for p in range(PARTITIONS) for i in range(start, start + 500)])
    source = await read_all(a, topic)
    source_offset = {r.value: r.offset for p in source for r in source[p]}  # value -> offset on A
    groups = {f"{prefix}-{name}": dict(enumerate(positions)) for name, positions in POSITIONS.items()}
    for group, positions in groups.items():
        await commit_on(a, group, {TopicPartition(topic, p): o for p, o in positions.items()})

    properties = tmp_path / "mm2.properties"
    write_properties(properties, cluster_a, cluster_b, prefix, batch_forwarding)
    mm2 = start_mm2(properties, tmp_path / "mm2.log")
    try:
        copies = await read_all(b, remote, expect=PARTITIONS * PER_PARTITION, timeout=90)
        sources = {p: [source_offset[r.value] for r in copies[p]] for p in range(PARTITIONS)}
        assert all(sorted(set(sources[p])) == list(range(PER_PARTITION)) for p in sources), "records missing on B"
        truth = {(g, p): exact_positions(sources[p], o) for g, positions in groups.items()
                 for p, o in positions.items()}
        # checkpoints move forward as syncs arrive (the last one when the task commits): wait until
        # every one is exact, then check them all once more
        deadline = asyncio.get_running_loop().time() + 45
        while True:
            latest = await latest_checkpoints(b, set(groups))
            if all(key in latest and latest[key].downstream_offset in valid for key, valid in truth.items()):
                break
            if asyncio.get_running_loop().time() > deadline:
                wrong = {k: (latest[k].downstream_offset if k in latest else None, sorted(v)[:3])
                         for k, v in truth.items() if k not in latest or latest[k].downstream_offset not in v}
                raise AssertionError(f"checkpoints not exact (got, truth): {wrong}\n"
                                     f"{(tmp_path / 'mm2.log').read_text()[-3000:]}")
            await asyncio.sleep(0.5)
    finally:
        assert stop_mm2(mm2) == 0

    for (group, partition), checkpoint in latest.items():
        assert checkpoint.topic == remote
        assert checkpoint.upstream_offset == groups[group][partition]
    # MM2's rule alone, on the same syncs, would have sent consumers back: the test shows something
    mm2 = await mm2_rule(a, topic)
    rereads = {}
    for (group, partition), valid in truth.items():
        translated = mm2.translate_mm2(topic, partition, groups[group][partition])
        assert translated is not None and translated <= min(valid)  # MM2 never skips either
        rereads[(group, partition)] = min(valid) - translated
    assert sum(1 for n in rereads.values() if n > 0) >= 3, rereads
    print(f"\nbatch.forwarding.enabled={batch_forwarding}: {len(truth)} checkpoints exact (0 re-reads); "
          f"MM2's rule would re-read {sum(rereads.values())} records over {len(truth)} positions")
