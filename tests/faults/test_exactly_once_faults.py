"""Exactly-once under repeated crashes (slow: run with scripts/faults or -m faults_slow).

The default suite kills ``mirrorline mm2`` twice (``tests/integration/exactly_once``); here it is
SIGKILLed five times, at random moments, under a heavier mixed load (plain records, committed and
aborted transactions), on both copy paths. B must end up with exactly A's committed records:
0 lost, 0 duplicated, 0 out of order, no aborted record.
"""

from __future__ import annotations

import asyncio
import random
import signal

import pytest

from support.eos import MixedLoad, eos_properties, read_committed, wait_for_committed
from support.faults import tally
from support.kafka import create_topic
from support.mm2 import start_mm2, stop_mm2

pytestmark = [pytest.mark.integration, pytest.mark.faults_slow]

PARTITIONS = 6
RATE = 2000
KILLS = 5


@pytest.mark.parametrize("forwarding", ["true", "false"], ids=["batches", "records"])
async def test_mm2_sigkilled_five_times_copies_every_committed_record_once(cluster_a, cluster_b, unique_name,
                                                                          tmp_path, forwarding):
    topic = unique_name("eosf")
    remote = f"A.{topic}"
    await create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    props = tmp_path / "mm2.properties"
    props.write_text(eos_properties(cluster_a, cluster_b, topic, unique_name("st"),
                                    f"A->B.batch.forwarding.enabled = {forwarding}\nA->B.tasks.max = 3\n"))
    log_path = tmp_path / "mm2.log"
    rng = random.Random(23)
    load = MixedLoad(cluster_a.bootstrap_servers, topic, PARTITIONS, RATE).start()
    proc = start_mm2(props, log_path)
    try:
        for kill in range(KILLS):
            await wait_for_committed(cluster_b, remote, (kill + 1) * RATE, proc, log_path, timeout=120)
            await asyncio.sleep(rng.uniform(0, 3))
            assert stop_mm2(proc, signal.SIGKILL) == -signal.SIGKILL
            proc = start_mm2(props, log_path)
        await asyncio.sleep(5)
        await asyncio.to_thread(load.stop)
        assert not load.errors, load.errors[:5]
        source = await asyncio.to_thread(read_committed, cluster_a.bootstrap_servers, topic)
        await wait_for_committed(cluster_b, remote, sum(len(v) for v in source.values()), proc, log_path, timeout=300)
        target = await asyncio.to_thread(read_committed, cluster_b.bootstrap_servers, remote)
    finally:
        load.stop()
        if proc.poll() is None:
            stop_mm2(proc)
    result = tally(source, target)
    print(f"\nexactly-once, {KILLS} SIGKILLs, batch.forwarding.enabled={forwarding}: {result.summary()}; "
          f"{len(load.aborted)} aborted source records")
    assert (result.lost, result.duplicated, result.out_of_order, result.foreign) == (0, 0, 0, 0), result.summary()
    assert target == source
    assert not load.aborted & {v for values in target.values() for v in values}
