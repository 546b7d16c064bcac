"""A worker of three SIGKILLed under load: its tasks move, nothing is lost, duplicates stay bounded."""

from __future__ import annotations

import asyncio
import signal

import pytest

from support.distributed import now_ms, overlaps, status_history, tasks_per_worker

pytestmark = [pytest.mark.integration, pytest.mark.faults_slow]

PARTITIONS = 6
TASKS = 6
RATE = 2000


async def test_one_of_three_workers_killed(scenario, shared_clusters, fault_report):
    s = scenario("4 one of 3 workers SIGKILL", shared_clusters, workers=3)
    topic = s.topic()
    await s.create_topic(topic, PARTITIONS)
    load = s.load(topic, PARTITIONS, RATE)
    await s.start_mirror(TASKS)
    spread = await s.wait_running(TASKS)
    deadline = asyncio.get_running_loop().time() + 60
    while len(tasks_per_worker(spread)) < 3:  # wait until every worker holds tasks
        assert asyncio.get_running_loop().time() < deadline, f"tasks never spread over 3 workers: {spread}"
        await asyncio.sleep(0.5)
        spread = await s.wait_running(TASKS)
    s.watch_progress(topic)
    await s.wait_copied(topic, 5 * RATE)
    # not the worker running the connector: its tasks, not the connector, are what must move
    victim = next(w for w in s.workers.workers if w.worker_id != spread["connector"]["worker_id"])
    killed_at = now_ms()
    assert s.workers.stop(victim, signal.SIGKILL) == -signal.SIGKILL
    s.note = f"killed {victim.worker_id}"
    await asyncio.sleep(10)
    moved = await s.wait_running(TASKS, timeout=60)
    assert victim.worker_id not in tasks_per_worker(moved)
    await asyncio.to_thread(load.stop)
    assert not load.errors, load.errors[:5]
    counted = await s.converge(topic, load.acknowledged(), timeout=120)
    await s.finish(counted, fault_report, expected_lost=0, dup_bound=None, tasks=TASKS)
    events = await status_history(s.workers.bootstrap, s.workers.status_topic, s.connector)
    assert not overlaps(events, {victim.worker_id: killed_at})
