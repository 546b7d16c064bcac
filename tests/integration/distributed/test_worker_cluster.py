"""A cluster of ``mirrorline distributed`` workers on real Kafka: sharing, rebalancing, failover.

Every test runs real worker processes against the session's clusters and checks, besides
what it is about, that no task ever ran on two workers at once (from the status topic).
"""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest

from support.distributed import (
    WorkerCluster,
    now_ms,
    overlaps,
    status_history,
    tasks_per_worker,
    wait_for_status,
)
from support.kafka import create_topic, produce, read_all, read_mirrored
from support.worker import Rest, all_running

pytestmark = pytest.mark.integration


@pytest.fixture
def worker_cluster(cluster_a, unique_name, tmp_path):
    """A function making a WorkerCluster of N workers on cluster A (stopped at the end; logs shown on failure)."""
    clusters = []

    def make(size: int, bootstrap: str | None = None, **settings) -> WorkerCluster:
        cluster = WorkerCluster(bootstrap or cluster_a.bootstrap_servers, unique_name("dist"), tmp_path,
                                {k.replace("_", "."): str(v) for k, v in settings.items()})
        for _ in range(size):
            cluster.add_worker()
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()
        print(cluster.logs()[-6000:])


def sequence_connector(name: str, topic: str, tasks: int, **overrides) -> dict:
    """A SequenceSource connector with one stream per task."""
    return {"name": name, "config": {"connector.class": "SequenceSource", "topic": topic, "streams": str(tasks),
                                     "tasks.max": str(tasks), "records.per.poll": "20", "poll.interval.ms": "100",
                                     **overrides}}


def balanced(workers: int, tasks: int):
    """Status predicate: all ``tasks`` RUNNING, spread over exactly ``workers`` workers as evenly as possible."""
    def check(status: dict) -> bool:
        counts = tasks_per_worker(status)
        return (len(status["tasks"]) == tasks and sum(counts.values()) == tasks and len(counts) == workers
                and max(counts.values()) - min(counts.values()) <= 1)
    return check


async def assert_no_overlap(cluster: WorkerCluster, connector: str, killed: dict[str, int] | None = None) -> None:
    """No task of ``connector`` ran on two workers at once, per the status topic."""
    events = await status_history(cluster.bootstrap, cluster.status_topic, connector)
    assert events, "the status topic holds no task statuses"
    problems = overlaps(events, killed)
    assert not problems, "\n".join(problems)


async def test_tasks_spread_rebalance_on_join_and_move_on_graceful_stop(worker_cluster, unique_name, cluster_a):
    """3 workers x 6 tasks = 2 each; a 4th joins and takes its share; one stops and its tasks move."""
    cluster = worker_cluster(3)
    await cluster.wait_healthy()
    name, topic = unique_name("seq"), unique_name("out")
    await create_topic(cluster_a.bootstrap_servers, topic, 3)
    async with Rest(cluster.workers[0].url) as rest:
        status, body = await rest.call("POST", "/connectors", sequence_connector(name, topic, 6))
        assert status == 201, body
        three = await wait_for_status(rest, name, balanced(3, 6))
        assert sorted(tasks_per_worker(three).values()) == [2, 2, 2]
        assert set(tasks_per_worker(three)) == {w.worker_id for w in cluster.workers}

        newcomer = cluster.add_worker()
        four = await wait_for_status(rest, name, balanced(4, 6))
        assert tasks_per_worker(four)[newcomer.worker_id] >= 1
        moved = sum(1 for before, after in zip(three["tasks"], four["tasks"]) if before["worker_id"] != after["worker_id"])
        # 6 tasks on 4 workers is 2+2+1+1: the newcomer's one task is all that needs to move
        assert moved == 1, f"only the newcomer's share should move, but {moved} tasks did: {three} -> {four}"

        leaving = cluster.workers[1]
        assert cluster.stop(leaving) == 0
        after = await wait_for_status(rest, name, balanced(3, 6))
        assert leaving.worker_id not in tasks_per_worker(after)
        assert sorted(tasks_per_worker(after).values()) == [2, 2, 2]
    await assert_no_overlap(cluster, name)


async def test_rest_on_every_worker(worker_cluster, unique_name, cluster_a):
    """Writes through any worker reach the leader; reads and statuses agree on every worker."""
    cluster = worker_cluster(3)
    await cluster.wait_healthy()
    name = unique_name("seq")
    topic = unique_name("out")
    await create_topic(cluster_a.bootstrap_servers, topic, 2)
    rests = [Rest(w.url) for w in cluster.workers]
    try:
        for worker_rest in rests:
            code, body = await worker_rest.call("POST", "/connectors", raw="{not json")
            assert code == 400 and "JSON" in body["message"]
        status, body = await rests[2].call("POST", "/connectors", sequence_connector(name, topic, 3))
        assert status == 201, body
        assert body["name"] == name and body["config"]["topic"] == topic
        for worker_rest in rests:
            running = await wait_for_status(worker_rest, name, all_running(3))
            assert {t["worker_id"] for t in running["tasks"]} <= {w.worker_id for w in cluster.workers}
            assert (await worker_rest.call("GET", "/connectors"))[1] == [name]
            assert (await worker_rest.call("GET", f"/connectors/{name}/config"))[1]["topic"] == topic

        # a second create of the same name is refused wherever it arrives (409 from the leader)
        for worker_rest in rests:
            code, body = await worker_rest.call("POST", "/connectors", sequence_connector(name, topic, 3))
            assert code == 409 and "already exists" in body["message"]

        # a config change through one worker is seen, and applied, through all
        changed = sequence_connector(name, topic, 2)["config"]
        code, body = await rests[1].call("PUT", f"/connectors/{name}/config", changed)
        assert code == 200, body
        for worker_rest in rests:
            await wait_for_status(worker_rest, name, all_running(2))
            assert len((await worker_rest.call("GET", f"/connectors/{name}/tasks"))[1]) == 2

        # pause and resume through different workers
        assert (await rests[0].call("PUT", f"/connectors/{name}/pause"))[0] == 202
        await wait_for_status(rests[2], name, lambda s: s["connector"]["state"] == "PAUSED"
                              and all(t["state"] == "PAUSED" for t in s["tasks"]) and len(s["tasks"]) == 2)
        assert (await rests[1].call("PUT", f"/connectors/{name}/resume"))[0] == 202
        await wait_for_status(rests[0], name, all_running(2))

        # a restart through a worker that does not run the task is carried out by its owner
        owner = (await rests[0].call("GET", f"/connectors/{name}/status"))[1]["tasks"][0]["worker_id"]
        other = next(r for r, w in zip(rests, cluster.workers) if w.worker_id != owner)
        assert (await other.call("POST", f"/connectors/{name}/tasks/0/restart"))[0] == 204

        # a write sent with forward=false to a worker that is not the leader is refused, not forwarded
        codes = [(await r.call("PUT", f"/connectors/{name}/config?forward=false", changed))[0] for r in rests]
        assert sorted(codes) == [200, 409, 409], codes

        # stop, then offsets can be read anywhere; delete through yet another worker
        assert (await rests[2].call("PUT", f"/connectors/{name}/stop"))[0] == 204
        stopped = await wait_for_status(rests[1], name, lambda s: s["connector"]["state"] == "STOPPED"
                                        and not s["tasks"])
        assert stopped["connector"]["worker_id"] in {w.worker_id for w in cluster.workers}
        code, offsets = await rests[0].call("GET", f"/connectors/{name}/offsets")
        assert code == 200 and {o["partition"]["stream"] for o in offsets["offsets"]} >= {0, 1}
        assert (await rests[1].call("DELETE", f"/connectors/{name}"))[0] == 204
        for worker_rest in rests:
            await worker_rest.wait_for("/connectors", lambda names: names == [])
            assert (await worker_rest.call("GET", f"/connectors/{name}/status"))[0] == 404
    finally:
        for worker_rest in rests:
            await worker_rest.close()
    await assert_no_overlap(cluster, name)


async def test_whole_cluster_restart_resumes_from_committed_offsets(worker_cluster, unique_name, cluster_a):
    """Every worker stopped, then started again: the connector comes back and continues each stream exactly."""
    cluster = worker_cluster(2)
    await cluster.wait_healthy()
    name, topic = unique_name("seq"), unique_name("out")
    await create_topic(cluster_a.bootstrap_servers, topic, 3)
    async with Rest(cluster.workers[0].url) as rest:
        assert (await rest.call("POST", "/connectors", sequence_connector(name, topic, 4)))[0] == 201
        await wait_for_status(rest, name, balanced(2, 4))
    await read_all(cluster_a.bootstrap_servers, topic, expect=400, timeout=60)
    for worker in cluster.workers:
        assert cluster.stop(worker) == 0
    before = _sequences(await read_all(cluster_a.bootstrap_servers, topic))
    for worker in cluster.workers:
        cluster.start(worker)
    await cluster.wait_healthy()
    async with Rest(cluster.workers[1].url) as rest:
        config = (await rest.call("GET", f"/connectors/{name}/config"))[1]
        assert config["topic"] == topic and config["tasks.max"] == "4"
        await wait_for_status(rest, name, balanced(2, 4))
    # Tasks start at different moments after the restart, so a total count could be reached by
    # three streams alone: wait until every stream has produced past where it stopped.
    deadline = time.monotonic() + 60
    total = sum(len(s) for s in before.values())
    while True:
        total += 40
        after = _sequences(await read_all(cluster_a.bootstrap_servers, topic, expect=total, timeout=10))
        resumed = all(len(after.get(s, [])) > len(before.get(s, [])) for s in range(4))
        if resumed or time.monotonic() > deadline:
            break
    # A stream's numbers are keyed over 3 partitions, and a running task's batches for them are
    # acknowledged in any order (several produce connections), so a read taken while the tasks
    # write can hold 571 before 570 lands. Pause, let the writes in flight land, then compare.
    async with Rest(cluster.workers[0].url) as rest:
        assert (await rest.call("PUT", f"/connectors/{name}/pause"))[0] == 202
        await wait_for_status(rest, name, lambda s: s["connector"]["state"] == "PAUSED"
                              and len(s["tasks"]) == 4 and all(t["state"] == "PAUSED" for t in s["tasks"]))
    after = await _settled_sequences(cluster_a.bootstrap_servers, topic)
    for stream in range(4):
        assert after[stream] == list(range(len(after[stream]))), f"stream {stream} has a gap or a repeat"
        assert len(after[stream]) > len(before[stream]), f"stream {stream} did not resume"
    await assert_no_overlap(cluster, name)


async def _settled_sequences(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[int, list[int]]:
    """:func:`_sequences` of ``topic`` once two reads a second apart agree (nothing more is landing)."""
    deadline = time.monotonic() + timeout
    last = _sequences(await read_all(bootstrap, topic))
    while True:
        await asyncio.sleep(1.0)
        now = _sequences(await read_all(bootstrap, topic))
        if now == last or time.monotonic() > deadline:
            return now
        last = now


def _sequences(records_by_partition) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for records in records_by_partition.values():
        for record in records:
            value = json.loads(record.value)
            out.setdefault(value["stream"], []).append(value["seq"])
    return {stream: sorted(seqs) for stream, seqs in out.items()}


async def test_sigkill_worker_mirror_source_moves_tasks_and_loses_nothing(
        worker_cluster, unique_name, cluster_a, cluster_b, flow_config):
    """A worker of three killed mid-stream: its MirrorSource tasks run elsewhere within the session
    timeout plus a few seconds, and every source record reaches the target (duplicates counted)."""
    cluster = worker_cluster(3, bootstrap=cluster_b.bootstrap_servers)
    session_timeout_s = 6.0
    await cluster.wait_healthy()
    prefix = unique_name("dk")
    topic = f"{prefix}-stream"
    partitions, total = 6, 24_000
    await create_topic(cluster_a.bootstrap_servers, topic, partitions)

    async def stream() -> None:
        for start in range(0, total, 400):
            await produce(cluster_a.bootstrap_servers, topic,
                          [(i % partitions, f"k{i}".encode(), f"v{i}".encode(), [], None)
                           for i in range(start, start + 400)])
            await asyncio.sleep(0.05)

    name = unique_name("mirror")
    config = flow_config(topics=f"{prefix}-.*", tasks_max=6)
    producer = asyncio.create_task(stream())
    try:
        async with Rest(cluster.workers[0].url) as rest:
            assert (await rest.call("POST", "/connectors", {"name": name, "config": config}))[0] == 201
            before = await wait_for_status(rest, name, balanced(3, 6), timeout=90)
            await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=total // 4, timeout=90)
            victim = next(w for w in cluster.workers if w.worker_id != before["connector"]["worker_id"])
            victim_tasks = {t["id"] for t in before["tasks"] if t["worker_id"] == victim.worker_id}
            killed_at = now_ms()
            assert cluster.stop(victim, signal.SIGKILL) == -signal.SIGKILL
            survivors = [w for w in cluster.workers if w is not victim]
        async with Rest(survivors[0].url) as rest:
            moved = await wait_for_status(rest, name, balanced(2, 6), timeout=60)
            recovered_s = (now_ms() - killed_at) / 1000
            assert {t["worker_id"] for t in moved["tasks"] if t["id"] in victim_tasks} <= \
                {w.worker_id for w in survivors}
            assert recovered_s <= session_timeout_s + 8, f"tasks moved only after {recovered_s:.1f}s"
        await producer
        source, target = await read_mirrored(cluster_a.bootstrap_servers, topic, cluster_b.bootstrap_servers,
                                              f"A.{topic}", timeout=120)
    finally:
        if not producer.done():
            producer.cancel()
    duplicates = 0
    for partition in range(partitions):
        expected = [(r.key, r.value) for r in source[partition]]
        copied = [(r.key, r.value) for r in target[partition]]
        deduplicated = list(dict.fromkeys(copied))
        assert deduplicated == expected, f"partition {partition}: a record is missing or out of order"
        duplicates += len(copied) - len(deduplicated)
    assert sum(len(r) for r in source.values()) == total
    print(f"\nSIGKILL one worker of three: tasks {sorted(victim_tasks)} running elsewhere after "
          f"{recovered_s:.1f}s (session timeout {session_timeout_s:.0f}s); {total} records all on B, "
          f"{duplicates} duplicates")
    await assert_no_overlap(cluster, name, killed={victim.worker_id: killed_at})


async def test_topics_created_while_the_cluster_rebalances_are_mirrored(worker_cluster, unique_name, cluster_a,
                                                                        cluster_b, flow_config):
    """A reconfiguration requested while a rebalance starts was once dropped, and a connector that
    stays on its worker (sticky assignment) never published it: the new topic was never mirrored.
    Here workers join and leave while new source topics appear, at several offsets in time."""
    cluster = worker_cluster(2, bootstrap=cluster_b.bootstrap_servers)
    await cluster.wait_healthy()
    prefix = unique_name("rb")
    await create_topic(cluster_a.bootstrap_servers, f"{prefix}-0", 2)
    name = unique_name("mirror")
    config = flow_config(topics=f"{prefix}-.*", tasks_max=4, refresh_topics_interval_seconds=1)
    async with Rest(cluster.workers[0].url) as rest:
        assert (await rest.call("POST", "/connectors", {"name": name, "config": config}))[0] == 201
        # 2 partitions, plus the partition of A's `heartbeats` topic if an earlier test made one (MM2
        # mirrors heartbeats topics whatever the topic filter): 2 or 3 tasks
        await wait_for_status(rest, name, lambda s: all_running(2)(s) or all_running(3)(s), timeout=90)
    created = []
    # The connector notices a topic within its 1 s refresh; a join or leave shortly after creating
    # it makes that refresh fall inside a rebalance at varying points.
    for round_, delay in enumerate((0.0, 0.2, 0.4, 0.6, 0.8, 1.0), start=1):
        topic = f"{prefix}-{round_}"
        await create_topic(cluster_a.bootstrap_servers, topic, 2)
        await produce(cluster_a.bootstrap_servers, topic, [(p, b"k", f"{topic}/{p}".encode(), [], None)
                                                           for p in range(2)])
        created.append(topic)
        await asyncio.sleep(delay)
        if round_ % 2:
            cluster.add_worker()
        else:
            cluster.stop(cluster.running()[-1])
        await asyncio.sleep(1.5)
    for topic in created:
        copied = await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=2, timeout=60)
        assert sorted(r.value for records in copied.values() for r in records) == \
            [f"{topic}/0".encode(), f"{topic}/1".encode()], f"{topic} was not mirrored\n{cluster.logs()}"
    await assert_no_overlap(cluster, name)
