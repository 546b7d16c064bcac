"""Exact checkpoints stay exact under exactly-once, although transactions leave commit markers on B.

``mirrorline mm2`` with ``B.exactly.once.source.support = enabled`` mirrors a topic written in
several rounds while it runs, so each remote partition holds several transactions, each followed
by its commit marker: downstream offsets are no longer those of a contiguous copy. Consumer
groups committed on A at positions that are not sync points must be checkpointed at a position
from which a consumer on B reads the copy of its next record first: 0 re-reads, 0 skips. The
truth comes from B itself, read by librdkafka (read_committed) with each record's offset.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import TopicPartition

from mirrorline.connectors.mirror_client.formats import Checkpoint
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.eos import read_committed_messages, read_committed_records
from support.kafka import commit_on, create_topic, produce
from support.mm2 import isolated_state, start_mm2, stop_mm2

pytestmark = pytest.mark.integration

PARTITIONS = 3
ROUNDS, PER_ROUND = 5, 200
POSITIONS = {"early": (1, 37, 399), "late": (801, ROUNDS * PER_ROUND, 777), "mixed": (600, 201, 999)}


def exact_positions(copies: list[tuple[int, int]], position: int, end: int) -> set[int]:
    """Target positions from which a consumer reads the copy of source record ``position`` first.

    ``copies``: ``(target offset, source offset)`` of each record of the remote partition, in order;
    ``end`` the partition's end offset. Anything after the previous record's copy and up to this
    one's copy is exact (the offsets between are transaction markers, which consumers skip).
    """
    target_of = {source: target for target, source in copies}
    before = target_of.get(position - 1, -1)
    upto = target_of.get(position, end)
    return set(range(before + 1, upto + 1))


async def test_checkpoints_are_exact_across_transaction_markers(cluster_a, cluster_b, unique_name, tmp_path):
    prefix = unique_name("xe")
    topic, remote = f"{prefix}-orders", f"A.{prefix}-orders"
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    await create_topic(a, topic, PARTITIONS)
    properties = tmp_path / "mm2.properties"
    properties.write_text(f"""clusters = A, B
A.bootstrap.servers = {a}
B.bootstrap.servers = {b}
A->B.enabled = true
A->B.topics = {topic}
groups = {prefix}-.*
tasks.max = 2
emit.heartbeats.enabled = false
B.exactly.once.source.support = enabled
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5
emit.checkpoints.interval.seconds = 1
refresh.groups.interval.seconds = 1
{isolated_state(prefix)}""")
    mm2 = start_mm2(properties, tmp_path / "mm2.log")
    try:
        deadline = asyncio.get_running_loop().time() + 90
        for start in range(0, ROUNDS * PER_ROUND, PER_ROUND):
            await produce(a, topic, [(p, None, f"{p}:{i}".encode(), [], None)
                                     for p in range(PARTITIONS) for i in range(start, start + PER_ROUND)])
            while True:  # each round is copied before the next is written: separate transactions
                held = await asyncio.to_thread(read_committed_records, b, remote)
                if sum(len(v) for v in held.values()) >= PARTITIONS * (start + PER_ROUND):
                    break
                assert asyncio.get_running_loop().time() < deadline, \
                    f"records missing on B\n{(tmp_path / 'mm2.log').read_text()[-3000:]}"
                await asyncio.sleep(0.3)
        groups = {f"{prefix}-{name}": dict(enumerate(positions)) for name, positions in POSITIONS.items()}
        for group, positions in groups.items():
            await commit_on(a, group, {TopicPartition(topic, p): o for p, o in positions.items()})
        copies = {p: [(offset, int(value.split(b":")[1])) for offset, value in held[p]] for p in range(PARTITIONS)}
        assert all([s for _, s in copies[p]] == list(range(ROUNDS * PER_ROUND)) for p in copies)
        markers = {p: copies[p][-1][0] + 1 - len(copies[p]) for p in copies}
        assert all(n >= 2 for n in markers.values()), f"expected several transactions per partition: {markers}"
        ends = {p: copies[p][-1][0] + 2 for p in copies}  # the last record's copy, then its commit marker
        truth = {(g, p): exact_positions(copies[p], o, ends[p]) for g, positions in groups.items()
                 for p, o in positions.items()}
        while True:
            latest = {}
            # written by an exactly-once checkpoint task too: in transactions
            for _, key, value in (await asyncio.to_thread(read_committed_messages, b, "A.checkpoints.internal"))[0]:
                checkpoint = Checkpoint.decode(key, value)
                if checkpoint.group in groups:
                    latest[(checkpoint.group, checkpoint.partition)] = checkpoint
            if all(key in latest and latest[key].downstream_offset in valid for key, valid in truth.items()):
                break
            if asyncio.get_running_loop().time() > deadline + 30:
                wrong = {k: (latest[k].downstream_offset if k in latest else None, sorted(v))
                         for k, v in truth.items() if k not in latest or latest[k].downstream_offset not in v}
                raise AssertionError(f"checkpoints not exact (got, exact positions): {wrong}\n"
                                     f"{(tmp_path / 'mm2.log').read_text()[-3000:]}")
            await asyncio.sleep(0.5)
    finally:
        assert stop_mm2(mm2) == 0
    for (group, partition), checkpoint in latest.items():
        assert checkpoint.topic == remote and checkpoint.upstream_offset == groups[group][partition]
