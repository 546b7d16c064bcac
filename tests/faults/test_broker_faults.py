"""Broker faults under load: the target or source broker killed, or frozen, while A->B mirrors.

These run on clusters of their own (``FA``/``FB``), never on the session's shared A and B.
Expected: nothing lost, duplicates within ``Scenario.crash_dup_bound()`` (peak copy rate x (flush
interval + in-flight time)), tasks RUNNING at the end.
"""

from __future__ import annotations

import asyncio

import pytest

from support.faults import kill_and_restart, pause_broker

pytestmark = [pytest.mark.integration, pytest.mark.faults_slow]

PARTITIONS = 6
TASKS = 2
RATE = 2000  # records/s over all partitions


async def _under_load(scenario, clusters, label: str, fault, after_s: float = 10.0, **mirror_overrides):
    """Mirror a topic under load, run ``fault()`` in a thread, keep loading ``after_s``, count."""
    s = scenario(label, clusters)
    topic = s.topic()
    await s.create_topic(topic, PARTITIONS)
    load = s.load(topic, PARTITIONS, RATE)
    await s.start_mirror(TASKS, **mirror_overrides)
    s.watch_progress(topic)
    await s.wait_copied(topic, 5 * RATE)
    unavailable = await asyncio.to_thread(fault)
    s.note = f"broker unavailable {unavailable:.0f}s"
    await asyncio.sleep(after_s)
    await asyncio.to_thread(load.stop)
    assert not load.errors, load.errors[:5]
    return s, topic, load


async def test_target_broker_killed_for_20s(scenario, broken_clusters, fault_report):
    """SIGKILL the target broker for 20 s, restart it with its data: every record still arrives once."""
    s, topic, load = await _under_load(
        scenario, broken_clusters, "1 target broker SIGKILL 20s",
        lambda: kill_and_restart(broken_clusters.target_cluster, down_s=20))
    counted = await s.converge(topic, load.acknowledged(), timeout=180, unconfirmed=load.unconfirmed())
    await s.finish(counted, fault_report, expected_lost=0, dup_bound=None, tasks=TASKS)


async def test_source_broker_killed_for_20s(scenario, broken_clusters, fault_report):
    """SIGKILL the source broker for 20 s (the load generator waits it out), restart it."""
    s, topic, load = await _under_load(
        scenario, broken_clusters, "2 source broker SIGKILL 20s",
        lambda: kill_and_restart(broken_clusters.source_cluster, down_s=20))
    counted = await s.converge(topic, load.acknowledged(), timeout=180, unconfirmed=load.unconfirmed())
    await s.finish(counted, fault_report, expected_lost=0, dup_bound=None, tasks=TASKS)


async def test_source_broker_killed_for_20s_under_tasks_sharing_their_clients(scenario, broken_clusters,
                                                                              fault_report):
    """The same with the setting for latency (operations.md): the two tasks share one consumer and one
    producer, and fetches gather for 5 ms. The shared consumer's one fetch loop must find the
    restarted leader for both tasks' partitions."""
    s, topic, load = await _under_load(
        scenario, broken_clusters, "4 source broker SIGKILL 20s, tasks.share.clients",
        lambda: kill_and_restart(broken_clusters.source_cluster, down_s=20),
        **{"tasks.share.clients": "true", "replication.fetch.gather.ms": "5"})
    logs = "".join(worker.log.read_text(errors="replace") for worker in s.workers.workers if worker.log.exists())
    assert "is shared: 2 readers in this process" in logs, "the two tasks did not share their consumer"
    counted = await s.converge(topic, load.acknowledged(), timeout=180, unconfirmed=load.unconfirmed())
    await s.finish(counted, fault_report, expected_lost=0, dup_bound=None, tasks=TASKS)


async def test_target_broker_stopped_for_30s(scenario, broken_clusters, fault_report):
    """SIGSTOP the target broker for 30 s: to the mirror's clients, a network partition."""
    s, topic, load = await _under_load(
        scenario, broken_clusters, "3 target broker SIGSTOP 30s",
        lambda: pause_broker(broken_clusters.target_cluster, 30))
    counted = await s.converge(topic, load.acknowledged(), timeout=180, unconfirmed=load.unconfirmed())
    await s.finish(counted, fault_report, expected_lost=0, dup_bound=None, tasks=TASKS)
