"""``mirrorline mm2 --processes 2``: one node runs a flow's tasks in two OS processes, against real Kafka.

Which process runs a task comes from the flow's status topic: a dedicated-mode worker's id is
``<flow>@<host>:<pid>``, so the pids there are the processes that ran the MirrorSource tasks.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from aiokafka import TopicPartition

from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.distributed import task_owners
from support.kafka import commit_on, create_topic, produce, read_all, record_tuples
from support.mm2 import isolated_state, start_mm2, stop_mm2

pytestmark = pytest.mark.integration

PARTITIONS, TOTAL = 4, 4_000


def write_properties(path: Path, cluster_a, cluster_b, prefix: str) -> None:
    """Flow A->B for ``prefix-.*`` with tasks.max=2, in worker groups and internal topics of this test."""
    path.write_text(f"""clusters = A, B
A.bootstrap.servers = {cluster_a.bootstrap_servers}
B.bootstrap.servers = {cluster_b.bootstrap_servers}
A->B.enabled = true
A->B.topics = {prefix}-.*
A->B.tasks.max = 2
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5
refresh.topics.interval.seconds = 2
B.offset.flush.interval.ms = 500
{isolated_state(prefix)}""")


def children_of(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is ``pid``, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, ...
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not zombie) process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def task_pids(bootstrap: str, status_topic: str, connector: str = "MirrorSourceConnector") -> dict[str, int]:
    """Task of ``connector`` -> pid of the process that runs it now (latest RUNNING, not since UNASSIGNED)."""
    owners = await task_owners(bootstrap, status_topic, connector)
    return {task: int(worker.rsplit(":", 1)[1]) for task, worker in owners.items()}


async def wait_for_spread(bootstrap: str, status_topic: str, timeout: float = 40.0) -> dict[str, int]:
    """Wait until both MirrorSource tasks run, each in its own process; return task -> pid."""
    deadline = time.monotonic() + timeout
    while True:
        pids = await task_pids(bootstrap, status_topic)
        if len(pids) == 2 and len(set(pids.values())) == 2:
            return pids
        assert time.monotonic() < deadline, f"MirrorSource tasks not spread over two processes: {pids}"
        await asyncio.sleep(1)


async def test_two_processes_share_the_tasks_and_stop_together(cluster_a, cluster_b, unique_name, tmp_path):
    """Both MirrorSource tasks run, in two processes; every record arrives once, in order; SIGTERM stops both."""
    prefix = unique_name("procs")
    topic = f"{prefix}-orders"
    await create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    sent = [(i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())], None)
            for i in range(TOTAL)]
    await produce(cluster_a.bootstrap_servers, topic, sent[:TOTAL // 2])
    write_properties(tmp_path / "mm2.properties", cluster_a, cluster_b, prefix)
    log = tmp_path / "mm2.log"
    parent = start_mm2(tmp_path / "mm2.properties", log, "--processes", "2")
    try:
        pids = await wait_for_spread(cluster_b.bootstrap_servers, f"mm2-status.{prefix}.internal")
        children = children_of(parent.pid)
        assert len(children) == 1, children
        assert set(pids.values()) == {parent.pid, children[0]}, (pids, parent.pid, children)
        await produce(cluster_a.bootstrap_servers, topic, sent[TOTAL // 2:])  # written while both run
        got = await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=TOTAL, timeout=60)
        for partition in range(PARTITIONS):
            expected = [(k, v, h) for p, k, v, h, _ in sent if p == partition]
            assert [t[:3] for t in record_tuples(got[partition])] == expected  # once each, in order
    finally:
        started = time.monotonic()
        code = stop_mm2(parent, timeout=60)
    stopped_in = time.monotonic() - started
    assert code == 0, log.read_text()[-3000:]
    assert stopped_in < 30, f"stopping took {stopped_in:.1f} s"
    assert not alive(children[0]), "the child outlived its parent"
    assert "Stopped the 1 other mm2 process(es) of this node" in log.read_text()


async def test_a_restarted_node_spreads_the_tasks_and_a_killed_child_stops_it(cluster_a, cluster_b, unique_name,
                                                                              tmp_path):
    """A node restarted with --processes 2 on an existing flow still runs one MirrorSource task per process.

    Its first process to join owns every task (their configs exist already), with a checkpoint
    task among them; the second must get one MirrorSource task, not whichever tasks sort last.
    Then SIGKILL of the child: the parent logs one line naming it, stops its own workers, exits 1.
    """
    prefix = unique_name("prockill")
    topic = f"{prefix}-orders"
    await create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    await produce(cluster_a.bootstrap_servers, topic, [(p, b"k", b"v", [], None) for p in range(PARTITIONS)])
    await commit_on(cluster_a.bootstrap_servers, f"{prefix}-app", {TopicPartition(topic, 0): 1})  # a checkpoint task
    write_properties(tmp_path / "mm2.properties", cluster_a, cluster_b, prefix)
    status_topic = f"mm2-status.{prefix}.internal"
    log = tmp_path / "mm2.log"
    single = start_mm2(tmp_path / "mm2.properties", log)
    try:
        deadline = time.monotonic() + 40
        while not (len(await task_pids(cluster_b.bootstrap_servers, status_topic)) == 2
                   and await task_pids(cluster_b.bootstrap_servers, status_topic, "MirrorCheckpointConnector")):
            assert time.monotonic() < deadline, "the flow's tasks did not start"
            await asyncio.sleep(1)
    finally:
        assert stop_mm2(single) == 0, log.read_text()[-3000:]

    parent = start_mm2(tmp_path / "mm2.properties", log, "--processes", "2")
    try:
        pids = await wait_for_spread(cluster_b.bootstrap_servers, status_topic)
        [child] = children_of(parent.pid)
        assert set(pids.values()) == {parent.pid, child}
        os.kill(child, signal.SIGKILL)
        started = time.monotonic()
        code = parent.wait(timeout=60)
    finally:
        if parent.poll() is None:
            stop_mm2(parent, signal.SIGKILL)
    text = log.read_text()
    assert code == 1, text[-3000:]
    assert time.monotonic() - started < 30
    reports = [line for line in text.splitlines() if "stopped unexpectedly" in line and " ERROR " in line]
    assert len(reports) == 1, text[-3000:]
    assert f"mm2 process 2 of 2 (pid {child}) stopped unexpectedly (killed by SIGKILL)" in reports[0]
    assert "Shutting down: stopping tasks and storing their offsets" in text  # the parent's own, gracefully
    assert text.rstrip().splitlines()[-1].startswith("mirrorline: error: mm2 process 2 of 2")
