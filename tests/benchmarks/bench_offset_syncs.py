"""Offset syncs and checkpoints after a burst and after a re-split: issue 23's two cases, with figures.

Starts two fresh local clusters (temporary state, free ports), runs ``mirrorline mm2`` as a user
would, and prints, over time, how many offset syncs were written, how many partitions have a sync
at their last record and how many are checkpointed at the group's position:

* ``burst``: ``offset.lag.max = 0``, ``sync.group.offsets.enabled = true``, 10 partitions x 50
  records produced while the mirror runs, one group committed at the end of each partition;
* ``resplit``: 4 partitions x 5,000 records before the mirror starts, ``tasks.max = 2``, two
  groups committed on every partition, MM2's default 60 s offset flush; once the backlog is on B a
  new topic makes the connector re-split its tasks, which restart after copying their partitions.

    .venv/bin/python tests/benchmarks/bench_offset_syncs.py              # both cases (~2 min)
    .venv/bin/python tests/benchmarks/bench_offset_syncs.py --case burst --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "tests"))  # tests/support: the suite's Kafka helpers

warnings.filterwarnings("ignore", category=DeprecationWarning)

from aiokafka import TopicPartition  # noqa: E402

from mirrorline.connectors.mirror_client.formats import Checkpoint, OffsetSync  # noqa: E402
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES  # noqa: E402
from mirrorline.localkafka.manager import LocalKafka  # noqa: E402
from mirrorline.testing.fixtures import _free_base_port  # noqa: E402
from support.kafka import commit_on, create_topic, produce, read_all  # noqa: E402
from support.mm2 import isolated_state  # noqa: E402


def log(message: str) -> None:
    print(message, flush=True)


async def state(a: str, b: str, topic: str, groups: dict[str, list[int]]) -> tuple[int, int, int, int]:
    """(syncs written, partitions synced at their last record, checkpoints at the group's exact position, wanted)."""
    syncs: dict[int, list[OffsetSync]] = collections.defaultdict(list)
    for record in (await read_all(a, "mm2-offset-syncs.B.internal")).get(0, []):
        sync = OffsetSync.decode(record.key, record.value)
        if sync.topic == topic:
            syncs[sync.partition].append(sync)
    ends = {p: len(r) for p, r in (await read_all(a, topic)).items()}
    at_last = sum(1 for p, end in ends.items() if syncs[p] and syncs[p][-1].upstream_offset == end - 1)
    latest = {}
    try:
        records = (await read_all(b, "A.checkpoints.internal", timeout=5)).get(0, [])
    except AssertionError:
        records = []
    for record in records:
        checkpoint = Checkpoint.decode(record.key, record.value)
        latest[(checkpoint.group, checkpoint.partition)] = checkpoint
    # B holds A's records at the same offsets here (fresh remote topic), so the exact position is the same number
    exact = sum(1 for g, positions in groups.items() for p, o in enumerate(positions)
                if (c := latest.get((g, p))) is not None and (c.upstream_offset, c.downstream_offset) == (o, o))
    wanted = sum(len(p) for p in groups.values())
    return sum(len(s) for s in syncs.values()), at_last, exact, wanted


async def run_case(case: str, a: str, b: str, tmp: Path, seconds: float) -> None:
    prefix = f"{case}{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}-orders"
    if case == "burst":
        partitions, per_partition, extra = 10, 50, ("offset.lag.max = 0\nsync.group.offsets.enabled = true\n"
                                                     "sync.group.offsets.interval.seconds = 1\n"
                                                     "emit.checkpoints.interval.seconds = 1\n"
                                                     "refresh.groups.interval.seconds = 1\n")
        groups = {f"{prefix}-app": [per_partition] * partitions}
    else:
        partitions, per_partition, extra = 4, 5000, ("tasks.max = 2\nemit.checkpoints.interval.seconds = 2\n"
                                                     "refresh.topics.interval.seconds = 2\n")
        groups = {f"{prefix}-g1": [1234, 1301, 2999, 4500], f"{prefix}-g2": [4321, 17, 5000, 2500]}
    await create_topic(a, topic, partitions)
    records = [(p, f"k{i}".encode(), f"{p}:{i}".encode(), [], None) for i in range(per_partition)
               for p in range(partitions)]
    if case == "resplit":
        await produce(a, topic, records)
        for group, positions in groups.items():
            await commit_on(a, group, {TopicPartition(topic, p): o for p, o in enumerate(positions)})
    properties = tmp / f"{prefix}.properties"
    properties.write_text(f"clusters = A, B\nA.bootstrap.servers = {a}\nB.bootstrap.servers = {b}\n"
                          f"A->B.enabled = true\nA->B.topics = {prefix}-.*\ngroups = {prefix}-.*\n"
                          f"{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5\n{extra}"
                          f"{isolated_state(prefix)}")
    mm2_log = tmp / f"{prefix}.log"
    with open(mm2_log, "w") as output:
        mm2 = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(properties)],
                               stdout=output, stderr=subprocess.STDOUT)
    try:
        if case == "burst":
            while "MirrorSourceConnector-0 mirrors" not in mm2_log.read_text():
                await asyncio.sleep(0.5)
            await produce(a, topic, records)
            for group, positions in groups.items():
                await commit_on(a, group, {TopicPartition(topic, p): o for p, o in enumerate(positions)})
        started = time.monotonic()
        await read_all(b, f"A.{topic}", expect=partitions * per_partition, timeout=300)
        log(f"\n{case}: {partitions} x {per_partition} records on B after {time.monotonic() - started:.1f} s")
        if case == "resplit":
            await create_topic(a, f"{prefix}-more", 1)
        log(f"  {'seconds':>7} {'syncs':>6} {'synced at last record':>22} {'checkpoints exact':>18}")
        while True:
            await asyncio.sleep(5)
            written, at_last, exact, wanted = await state(a, b, topic, groups)
            elapsed = time.monotonic() - started
            log(f"  {elapsed:>7.1f} {written:>6} {at_last:>15} of {partitions:<4} {exact:>11} of {wanted:<4}")
            if elapsed > seconds or (at_last == partitions and exact == wanted):
                break
        resplits = mm2_log.read_text().count("re-splitting tasks")
        log(f"  summary {case}: {written} syncs, {at_last}/{partitions} partitions synced at their last record, "
            f"{exact}/{wanted} checkpoints at the exact position, {elapsed:.0f} s, re-splits {resplits}")
    finally:
        mm2.send_signal(signal.SIGTERM)
        mm2.wait(60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=["burst", "resplit", "both"], default="both")
    parser.add_argument("--seconds", type=float, default=60, help="give up waiting after this many seconds per case")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="mirrorline-bench-syncs-"))
    manager = LocalKafka(tmp / "kafka", _free_base_port(2))
    try:
        log(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; state under {tmp}")
        a, b = (c.spec.bootstrap_servers for c in manager.start(["A", "B"]))
        for case in (["burst", "resplit"] if args.case == "both" else [args.case]):
            asyncio.run(run_case(case, a, b, tmp, args.seconds))
    finally:
        manager.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
