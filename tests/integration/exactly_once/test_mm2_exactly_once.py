"""Exactly-once mirroring with ``mirrorline mm2`` (KIP-618), SIGKILLed twice under load.

A producer on A writes plain records and transactions it commits and aborts; ``mirrorline mm2``
runs the flow A->B from an mm2.properties written as for Java MM2 with exactly-once
(``B.exactly.once.source.support = enabled``, ``dedicated.mode.enable.internal.rest = true``) and
is SIGKILLed twice while copying. A read_committed consumer on B (librdkafka) must then find
exactly the records a read_committed consumer finds on A: every committed one, once, in order,
and not one aborted record; Kafka's own ConsoleConsumer (``--isolation-level read_committed``)
counts the same. Both copying paths: whole record batches and record by record.
"""

from __future__ import annotations

import asyncio
import signal

import pytest

from support.eos import MixedLoad, eos_properties, java_committed_counts, read_committed, wait_for_committed
from support.faults import tally
from support.kafka import create_topic
from support.mm2 import start_mm2, stop_mm2

pytestmark = pytest.mark.integration

PARTITIONS = 4
RATE = 800


@pytest.mark.parametrize("forwarding", ["true", "false"], ids=["batches", "records"])
async def test_mm2_sigkilled_twice_copies_every_committed_record_once(cluster_a, cluster_b, unique_name, tmp_path,
                                                                     forwarding):
    topic = unique_name("eos")
    remote = f"A.{topic}"
    await create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    props = tmp_path / "mm2.properties"
    props.write_text(eos_properties(cluster_a, cluster_b, topic, unique_name("st"),
                                    f"A->B.batch.forwarding.enabled = {forwarding}\n"))
    log_path = tmp_path / "mm2.log"
    load = MixedLoad(cluster_a.bootstrap_servers, topic, PARTITIONS, RATE).start()
    proc = start_mm2(props, log_path)
    try:
        for kill in range(2):
            await wait_for_committed(cluster_b, remote, (kill + 1) * RATE, proc, log_path)
            assert stop_mm2(proc, signal.SIGKILL) == -signal.SIGKILL
            proc = start_mm2(props, log_path)
        await asyncio.sleep(2)
        await asyncio.to_thread(load.stop)
        assert not load.errors, load.errors[:5]
        source = await asyncio.to_thread(read_committed, cluster_a.bootstrap_servers, topic)
        total = sum(len(v) for v in source.values())
        assert total > 2 * RATE and load.aborted
        await wait_for_committed(cluster_b, remote, total, proc, log_path, timeout=120)
        target = await asyncio.to_thread(read_committed, cluster_b.bootstrap_servers, remote)
    finally:
        load.stop()
        if proc.poll() is None:
            stop_mm2(proc)
    result = tally(source, target)
    assert (result.lost, result.duplicated, result.out_of_order, result.foreign) == (0, 0, 0, 0), result.summary()
    assert target == source, "B must hold exactly A's committed records, partition by partition, in order"
    assert not load.aborted & {v for values in target.values() for v in values}, "an aborted record was mirrored"
    if forwarding == "true":  # Kafka's own tool agrees (once is enough: it is the same topic format)
        java = await asyncio.to_thread(java_committed_counts, cluster_b.bootstrap_servers, remote)
        assert java == {p: len(v) for p, v in source.items() if v}
    log_text = log_path.read_text()
    assert "writes exactly-once: transactional id" in log_text
    assert ("forwarding record batches whole" in log_text) == (forwarding == "true")
