"""Mirroring topic selection at run time (IBM Event Streams-style), against real clusters A and B.

Selections are changed through ``/admin/mirroring/*`` on a worker that does not run the
connector, through ``mirrorline mirroring ... --url``, and through ``mirrorline mirroring ...
MM2_PROPERTIES --flow`` for MM2's dedicated mode; each change reaches the tasks without any
worker or connector being restarted.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import uuid

import pytest

from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.distributed import WorkerCluster, wait_for_status
from support.kafka import produce, read_all
from support.worker import Rest, all_running

pytestmark = pytest.mark.integration

SELECTION = "/admin/mirroring/topic-selection"
ACTIVE = "/admin/mirroring/active-topics"
# The connector reads its stored selection at every topic refresh: with 2 s a change reaches the
# tasks within seconds (MM2's default, 600 s, would make each step of this test wait 10 minutes).
REFRESH_S = 2


@pytest.fixture
def worker_cluster(cluster_b, unique_name, tmp_path):
    """A cluster of N ``mirrorline distributed`` worker processes keeping their state on B, as MM2's do."""
    clusters = []

    def make(size: int) -> WorkerCluster:
        cluster = WorkerCluster(cluster_b.bootstrap_servers, unique_name("sel"), tmp_path)
        for _ in range(size):
            cluster.add_worker()
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()
        print(cluster.logs()[-6000:])


async def mirrorline(*args: str) -> tuple[int, str, str]:
    """Run ``mirrorline mirroring ARGS`` as a user would; (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "mirrorline.cli.main", "mirroring", *args,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode, out.decode(), err.decode()


async def mirrorline_json(*args: str) -> object:
    """The JSON ``mirrorline mirroring ARGS`` prints (it must succeed)."""
    code, out, err = await mirrorline(*args)
    assert code == 0, err
    return json.loads(out)


async def count(bootstrap: str, topic: str) -> int:
    """Records in ``topic`` now."""
    return sum(len(records) for records in (await read_all(bootstrap, topic, timeout=5)).values())


def records(prefix: str, n: int) -> list[tuple]:
    """``n`` records over two partitions, timestamped now."""
    return [(i % 2, None, f"{prefix}-{i}".encode(), [], None) for i in range(n)]


async def test_selection_changes_mirroring_on_a_worker_cluster_without_restarts(
        cluster_a, cluster_b, make_topic, flow_config, worker_cluster, unique_name):
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    t1 = await make_topic(cluster_a, partitions=2, prefix="sel1")
    t2 = await make_topic(cluster_a, partitions=2, prefix="sel2")
    cluster = worker_cluster(2)
    await cluster.wait_healthy()
    name = unique_name("mirror")
    config = flow_config(topics=t1, tasks_max=1, refresh_topics_interval_seconds=REFRESH_S,
                         heartbeats_replication_enabled="false")  # so that [""] leaves no topic at all
    async with Rest(cluster.workers[0].url) as rest0:
        status, body = await rest0.call("POST", "/connectors", {"name": name, "config": config})
        assert status == 201, body
        running = await wait_for_status(rest0, name, all_running(1))
    owner = running["connector"]["worker_id"]
    other = next(w for w in cluster.workers if w.worker_id != owner)  # serves the API, runs no connector
    pids = {w.worker_id: w.proc.pid for w in cluster.workers}
    await produce(a, t1, records("before", 4))
    await read_all(b, f"A.{t1}", expect=4, timeout=60)

    async with Rest(other.url) as rest:
        assert await rest.call("GET", SELECTION) == (200, {"includes": [t1]})  # none stored: `topics`
        await rest.wait_for(ACTIVE, lambda body: body == {"active_topics": [t1]}, timeout=60)

        # add t2, drop t1
        assert await rest.call("POST", SELECTION, {"includes": [t2]}) == (200, {"includes": [t2]})
        assert await rest.call("GET", SELECTION) == (200, {"includes": [t2]})
        assert await rest.call("GET", f"{SELECTION}?connector={name}") == (200, {"includes": [t2]})
        await rest.wait_for(ACTIVE, lambda body: body == {"active_topics": [t2]}, timeout=60)
        await produce(a, t2, records("t2", 6))
        mirrored = await read_all(b, f"A.{t2}", expect=6, timeout=60)
        assert sorted(r.value for rs in mirrored.values() for r in rs) == sorted(v for *_, v, _, _ in
                                                                                  records("t2", 6))
        t1_copies = await count(b, f"A.{t1}")
        await produce(a, t1, records("after", 4))
        await asyncio.sleep(3 * REFRESH_S + 2)  # time enough for a task still reading t1 to copy them
        assert await count(b, f"A.{t1}") == t1_copies == 4

        # nothing was restarted: same worker processes, same connector instance
        status = await wait_for_status(rest, name, all_running(1))
        assert status["connector"]["worker_id"] == owner and "restarts" not in status["connector"]
        assert {w.worker_id: w.proc.pid for w in cluster.workers} == pids
        assert all(w.proc.poll() is None for w in cluster.workers)

        # [""] selects nothing (IBM's way to say it): no topic, no task
        assert await rest.call("POST", SELECTION, {"includes": [""]}) == (200, {"includes": [""]})
        await rest.wait_for(ACTIVE, lambda body: body == {"active_topics": []}, timeout=60)
        assert (await rest.call("GET", SELECTION))[1] == {"includes": [""]}

        # bad input is a 400 naming the problem, and changes nothing
        status, body = await rest.call("POST", SELECTION, {"includes": [t1, "orders-("]})
        assert status == 400 and body["error_code"] == 400 and "'orders-('" in body["message"], body
        status, body = await rest.call("POST", SELECTION, raw="{includes: [t1]")
        assert status == 400 and "not valid JSON" in body["message"], body
        status, body = await rest.call("POST", SELECTION, {"includes": t1})
        assert status == 400 and "must be an array" in body["message"], body
        assert (await rest.call("GET", SELECTION))[1] == {"includes": [""]}

        # the same controls from the command line, through the REST API
        assert await mirrorline_json("topic-selection", "set", "--url", other.url, "--includes", t1, t2) == \
            {"includes": [t1, t2]}
        assert await mirrorline_json("topic-selection", "get", "--url", other.url, "--connector", name) == \
            {"includes": [t1, t2]}
        await rest.wait_for(ACTIVE, lambda body: body == {"active_topics": sorted([t1, t2])}, timeout=60)
        assert await mirrorline_json("active-topics", "--url", other.url) == {"active_topics": sorted([t1, t2])}
        code, _, err = await mirrorline("active-topics", "--url", other.url, "--connector", "nope")
        assert code == 1 and err.strip().splitlines() == [
            "mirrorline: error: GET /admin/mirroring/active-topics answered 404: Connector nope not found"]
        # and back to the configured topics
        assert await mirrorline_json("topic-selection", "reset", "--url", other.url) == {"includes": [t1]}
        await rest.wait_for(ACTIVE, lambda body: body == {"active_topics": [t1]}, timeout=60)
        status = await wait_for_status(rest, name, all_running(1))
        assert "restarts" not in status["connector"] and {w.worker_id: w.proc.pid for w in cluster.workers} == pids


async def test_mm2_dedicated_mode_is_steered_from_the_command_line(cluster_a, cluster_b, make_topic, tmp_path):
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    t1 = await make_topic(cluster_a, partitions=2, prefix="mm1")
    t2 = await make_topic(cluster_a, partitions=2, prefix="mm2")
    # aliases of this test alone: its flow's groups, internal topics and stored selection are its own
    suffix = uuid.uuid4().hex[:6]
    source, target = f"S{suffix}", f"T{suffix}"
    props = tmp_path / "mm2.properties"
    props.write_text(f"""clusters = {source}, {target}
{source}.bootstrap.servers = {a}
{target}.bootstrap.servers = {b}
{source}->{target}.enabled = true
{source}->{target}.topics = {t1}
{source}->{target}.tasks.max = 1
emit.heartbeats.enabled = false
heartbeats.replication.enabled = false
refresh.topics.interval.seconds = {REFRESH_S}
{SINGLE_BROKER_MM2_PROPERTIES}""")
    flow = ["--flow", f"{source}->{target}"]
    with open(tmp_path / "mm2.log", "a") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(props)],
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        await produce(a, t1, records("t1", 4))
        await read_all(b, f"{source}.{t1}", expect=4, timeout=90)
        assert await mirrorline_json("topic-selection", "get", str(props), *flow) == {"includes": [t1]}
        assert await mirrorline_json("active-topics", str(props), *flow) == {"active_topics": [t1]}

        assert await mirrorline_json("topic-selection", "set", str(props), *flow, "--includes", t2) == \
            {"includes": [t2]}
        assert await mirrorline_json("topic-selection", "get", str(props), *flow) == {"includes": [t2]}
        deadline = time.monotonic() + 90
        while (active := await mirrorline_json("active-topics", str(props), *flow)) != {"active_topics": [t2]}:
            assert time.monotonic() < deadline, active
            await asyncio.sleep(1)
        await produce(a, t2, records("t2", 4))
        await read_all(b, f"{source}.{t2}", expect=4, timeout=60)

        assert await mirrorline_json("topic-selection", "set", str(props), *flow, "--none") == {"includes": [""]}
        assert await mirrorline_json("topic-selection", "reset", str(props), *flow) == {"includes": [t1]}
        assert proc.poll() is None  # dedicated mode ran throughout
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        print((tmp_path / "mm2.log").read_text()[-6000:])
