"""Exactly-once mirroring on a group of ``mirrorline distributed`` workers: a SIGKILL and a zombie.

Three workers with ``exactly.once.source.support=enabled`` keep their internal topics on B and
run a MirrorSource connector A->B while a producer on A writes plain records and transactions it
commits and aborts. One worker is SIGKILLed; then one of the two left is frozen (SIGSTOP) until the
group has moved its tasks and their new instances have committed, then woken (SIGCONT): the
transactions it had open were aborted when its tasks' new instances initialised, and everything
it tries to write after waking is refused. Either way a read_committed consumer on B (librdkafka)
finds exactly A's committed records, once each, in order, none aborted.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from support.distributed import WorkerCluster, tasks_per_worker, wait_for_status
from support.eos import MixedLoad, read_committed
from support.faults import tally
from support.kafka import create_topic
from support.worker import Rest, all_running

pytestmark = pytest.mark.integration

PARTITIONS = 4
TASKS = 4
RATE = 600


@pytest.fixture
def eos_workers(cluster_b, unique_name, tmp_path):
    """``eos_workers(n)``: a WorkerCluster of ``n`` exactly-once workers on B (stopped at the end)."""
    made = []

    def make(size: int) -> WorkerCluster:
        cluster = WorkerCluster(cluster_b.bootstrap_servers, unique_name("eos"), tmp_path,
                                {"exactly.once.source.support": "enabled"})
        for _ in range(size):
            cluster.add_worker()
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        for worker in cluster.workers:  # a test that failed mid-way may leave one stopped
            if worker.proc is not None and worker.proc.poll() is None:
                worker.proc.send_signal(signal.SIGCONT)
        cluster.close()
        print(cluster.logs()[-8000:])


async def wait_committed(cluster_b, remote: str, at_least: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        held = sum(len(v) for v in (await asyncio.to_thread(read_committed, cluster_b.bootstrap_servers,
                                                            remote)).values())
        if held >= at_least:
            return
        assert time.monotonic() < deadline, f"B holds {held} committed records of {remote}, expected {at_least}"
        await asyncio.sleep(1)


async def start_mirror(rest: Rest, name: str, topic: str, flow_config) -> dict:
    config = flow_config(topics=topic, tasks_max=TASKS, exactly_once_support="required")
    status, body = await rest.call("PUT", f"/connectors/{name}/config", config)
    assert status == 201, body
    return await wait_for_status(rest, name, all_running(TASKS), timeout=90)


async def spread_over(rest: Rest, name: str, workers: int, timeout: float = 60) -> dict:
    """The status once the tasks run on ``workers`` workers."""
    return await wait_for_status(rest, name, lambda s: len(s["tasks"]) == TASKS and all(
        t["state"] == "RUNNING" for t in s["tasks"]) and len(tasks_per_worker(s)) == workers, timeout=timeout)


async def finish(load: MixedLoad, cluster_a, cluster_b, topic: str) -> None:
    """Stop the load; B must end up with exactly A's committed records."""
    await asyncio.to_thread(load.stop)
    assert not load.errors, load.errors[:5]
    source = await asyncio.to_thread(read_committed, cluster_a.bootstrap_servers, topic)
    remote = f"A.{topic}"
    await wait_committed(cluster_b, remote, sum(len(v) for v in source.values()), timeout=120)
    await asyncio.sleep(2)  # anything written late (it must not be) would show now
    target = await asyncio.to_thread(read_committed, cluster_b.bootstrap_servers, remote)
    result = tally(source, target)
    assert (result.lost, result.duplicated, result.out_of_order, result.foreign) == (0, 0, 0, 0), result.summary()
    assert target == source
    assert load.aborted and not load.aborted & {v for values in target.values() for v in values}


async def test_a_worker_sigkilled_then_another_frozen_and_woken(eos_workers, cluster_a, cluster_b, unique_name,
                                                                 flow_config):
    """One of three workers SIGKILLed; then one of the two left frozen (SIGSTOP) until the group moved
    its tasks and their new instances committed, then woken (SIGCONT): not one extra record on B."""
    cluster = eos_workers(3)
    await cluster.wait_healthy()
    topic, name = unique_name("eos"), unique_name("mirror")
    remote = f"A.{topic}"
    await create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    load = MixedLoad(cluster_a.bootstrap_servers, topic, PARTITIONS, RATE).start()
    try:
        async with Rest(cluster.workers[0].url) as rest:
            await start_mirror(rest, name, topic, flow_config)
            spread = await spread_over(rest, name, 3)
            for worker in cluster.workers:  # the internal fencing endpoint, on the leader or forwarded to it
                async with Rest(worker.url) as any_worker:
                    assert (await any_worker.call("PUT", f"/connectors/{name}/fence"))[0] == 204
            await wait_committed(cluster_b, remote, 2 * RATE)
            victim = next(w for w in cluster.workers if w.worker_id in tasks_per_worker(spread)
                          and w.worker_id != spread["connector"]["worker_id"] and w is not cluster.workers[0])
            assert cluster.stop(victim, signal.SIGKILL) == -signal.SIGKILL
            moved = await spread_over(rest, name, 2, timeout=90)
            assert victim.worker_id not in tasks_per_worker(moved)
            before = await committed_count(cluster_b, remote)
            await wait_committed(cluster_b, remote, before + RATE)

            zombie = next(w for w in cluster.workers if w is not victim and w is not cluster.workers[0])
            assert zombie.worker_id in tasks_per_worker(moved)
            zombie.proc.send_signal(signal.SIGSTOP)
            try:
                alone = await spread_over(rest, name, 1, timeout=90)  # the group gave its tasks to the last one
                assert set(tasks_per_worker(alone)) == {cluster.workers[0].worker_id}
                # their new instances committed after taking over: the zombie's producers are fenced by now
                before = await committed_count(cluster_b, remote)
                await wait_committed(cluster_b, remote, before + RATE)
            finally:
                zombie.proc.send_signal(signal.SIGCONT)
            await asyncio.sleep(5)  # the zombie runs again: its tasks try to write what they had polled
            await finish(load, cluster_a, cluster_b, topic)
    finally:
        load.stop()
    # the zombie learnt it had been replaced: its producer was refused (fenced), or it heard it lost the group
    zombie_log = zombie.log.read_text(errors="replace")
    assert "ProducerFenced" in zombie_log or "was fenced" in zombie_log or "was dropped from group" in zombie_log, \
        zombie_log[-4000:]


async def committed_count(cluster_b, remote: str) -> int:
    return sum(len(v) for v in (await asyncio.to_thread(read_committed, cluster_b.bootstrap_servers, remote)).values())
