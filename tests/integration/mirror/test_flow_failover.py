"""``mirrorline failover MM2_PROPERTIES --flow A->B`` and ``mirrorline failback``: whole flows, real clusters.

The recovery point the command prints before acting, and the positions it commits, are checked
against the truth this test computes on its own by reading both clusters record by record.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from mirrorline.connectors.mirror_client.formats import Checkpoint
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.kafka import commit_on, create_topic, group_offsets, produce, read_all
from support.mm2 import isolated_state, start_mm2, stop_mm2

pytestmark = pytest.mark.integration

ORDERS_PARTITIONS = 3
RESULTS_PARTITIONS = 2


def cli(*args: str) -> subprocess.CompletedProcess:
    """Run ``mirrorline ARGS`` and return its result."""
    return subprocess.run([sys.executable, "-m", "mirrorline.cli.main", *args], capture_output=True, text=True,
                          timeout=180)


def write_properties(path, cluster_a, cluster_b, prefix: str) -> None:
    """Flows A->B (the prefix's orders) and B->A (its results, for the failback), both enabled."""
    path.write_text(f"""clusters = A, B
A.bootstrap.servers = {cluster_a.bootstrap_servers}
B.bootstrap.servers = {cluster_b.bootstrap_servers}
A->B.enabled = true
A->B.topics = {prefix}-orders
B->A.enabled = true
B->A.topics = {prefix}-results
groups = {prefix}-.*
tasks.max = 2
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5
# short intervals so the test sees checkpoints and new topics within seconds (MM2's defaults are 60 s / 10 min)
emit.checkpoints.interval.seconds = 1
refresh.groups.interval.seconds = 1
refresh.topics.interval.seconds = 2
A.offset.flush.interval.ms = 500
B.offset.flush.interval.ms = 500
{isolated_state(prefix)}""")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM and wait: the workers store their offsets before exiting."""
    assert stop_mm2(proc) == 0


def contents(records) -> list[tuple]:
    """What mirroring keeps of each record, in order."""
    return [(r.key, r.value, tuple(r.headers), r.timestamp) for r in records]


async def wait_for_checkpoints(bootstrap: str, wanted: dict[str, int], timeout: float = 60.0) -> None:
    """Until each group has checkpoints for its number of partitions in ``A.checkpoints.internal``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        records = (await read_all(bootstrap, "A.checkpoints.internal")).get(0, [])
        seen: dict[str, set] = {}
        for record in records:
            checkpoint = Checkpoint.decode(record.key, record.value)
            seen.setdefault(checkpoint.group, set()).add(checkpoint.partition)
        if all(len(seen.get(g, ())) >= n for g, n in wanted.items()):
            return
        assert asyncio.get_running_loop().time() < deadline, f"no checkpoints for {wanted} (saw {seen})"
        await asyncio.sleep(0.5)


def exact_position(origin: list[tuple], position: int, copies: list[tuple]) -> int:
    """Truth: where a consumer that read ``origin[:position]`` continues on ``copies`` (no duplicates
    there): just after the last copy of a record it read."""
    read = set(origin[:position])
    after = [i + 1 for i, record in enumerate(copies) if record in read]
    return max(after, default=0)


def rpo_row(stdout: str, topic: str) -> tuple[int, float]:
    """(records, seconds) of ``topic`` in the printed recovery point."""
    for line in stdout.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[0] == topic:
            return int(fields[2]), float(fields[3])
    raise AssertionError(f"no recovery-point row for {topic}:\n{stdout}")


async def test_whole_flow_failover_and_failback(cluster_a, cluster_b, unique_name, tmp_path):
    prefix = unique_name("ff")
    orders, results, remote_orders = f"{prefix}-orders", f"{prefix}-results", f"A.{prefix}-orders"
    app, audit, reporter = f"{prefix}-app", f"{prefix}-audit", f"{prefix}-reporter"
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    await create_topic(a, orders, ORDERS_PARTITIONS)
    await create_topic(b, results, RESULTS_PARTITIONS)
    await produce(a, orders, [(p, f"k{i}".encode(), f"order-{p}-{i}".encode(), [("h", b"1")], None)
                              for p in range(ORDERS_PARTITIONS) for i in range(100)])
    properties = tmp_path / "mm2.properties"
    write_properties(properties, cluster_a, cluster_b, prefix)
    log_path = tmp_path / "mm2.log"
    mm2 = start_mm2(properties, log_path)
    try:
        await read_all(b, remote_orders, expect=300, timeout=90)
        await commit_on(a, app, {TopicPartition(orders, 0): 30, TopicPartition(orders, 1): 55,
                                 TopicPartition(orders, 2): 100})
        await commit_on(a, audit, {TopicPartition(orders, 0): 10})
        await wait_for_checkpoints(b, {app: ORDERS_PARTITIONS, audit: 1})
    finally:
        stop(mm2)

    # A receives records the mirror no longer copies: the recovery point
    await produce(a, orders, [(p, f"late{i}".encode(), f"late-{p}-{i}".encode(), [], None)
                              for p in range(ORDERS_PARTITIONS) for i in range(7 - (p == 2))])
    on_a, on_b = await read_all(a, orders), await read_all(b, remote_orders)
    truth_missing = sum(len(set(contents(on_a[p])) - set(contents(on_b.get(p, [])))) for p in on_a)
    truth_seconds = max((on_a[p][-1].timestamp - on_b[p][-1].timestamp) / 1000 for p in on_a)
    assert truth_missing == 20

    dry = cli("failover", str(properties), "--flow", "A->B", "--groups", f"{prefix}-.*", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    missing, seconds = rpo_row(dry.stdout, orders)
    assert missing == truth_missing, dry.stdout
    assert abs(seconds - truth_seconds) <= 0.051, (seconds, truth_seconds, dry.stdout)
    assert "dry run: nothing changed" in dry.stdout and f"group {app} (Dead on B)" in dry.stdout
    assert not await group_offsets(b, app)

    # an active member of a group on B: refused, one line, nothing committed
    member = AIOKafkaConsumer(bootstrap_servers=b, group_id=audit, enable_auto_commit=False)
    await member.start()
    try:
        member.subscribe([remote_orders])
        await member.getmany(timeout_ms=3000)
        # in a thread: the member must keep sending heartbeats from this event loop meanwhile
        refused = await asyncio.to_thread(cli, "failover", str(properties), "--flow", "A->B", "--groups",
                                          f"{prefix}-.*", "--exact")
        assert refused.returncode == 1, refused.stdout
        assert re.match(rf"mirrorline: error: group\(s\) active on B: {audit} \(Stable\)",
                        refused.stderr.strip().splitlines()[-1]), refused.stderr
    finally:
        await member.stop()
    assert not await group_offsets(b, app)

    done = cli("failover", str(properties), "--flow", "A->B", "--groups", f"{prefix}-.*", "--exact", "--stop-flow")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "connector MirrorSourceConnector of flow A->B: stopped" in done.stdout
    committed_app = await group_offsets(b, app)
    committed_a = await group_offsets(a, app)
    for p in range(ORDERS_PARTITIONS):
        truth = exact_position(contents(on_a[p]), committed_a[TopicPartition(orders, p)], contents(on_b[p]))
        assert committed_app[TopicPartition(remote_orders, p)] == truth, (p, done.stdout)
    assert (await group_offsets(b, audit))[TopicPartition(remote_orders, 0)] == 10
    assert re.search(rf"group {app} \(Dead on B\): 3 partition\(s\), 0 re-read\(s\)", done.stdout), done.stdout

    again = cli("failover", str(properties), "--flow", "A->B", "--groups", f"{prefix}-.*", "--exact", "--stop-flow")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"group {app}: unchanged on B" in again.stdout and "already stopped" in again.stdout

    # the application now runs on B: it reads further and writes results there
    await commit_on(b, app, {TopicPartition(remote_orders, 0): 80, TopicPartition(remote_orders, 1): 90,
                             TopicPartition(remote_orders, 2): 100})
    await produce(b, results, [(p, f"r{i}".encode(), f"result-{p}-{i}".encode(), [], None)
                               for p in range(RESULTS_PARTITIONS) for i in range(5)])
    await commit_on(b, reporter, {TopicPartition(results, 0): 3, TopicPartition(results, 1): 2})

    mm2 = start_mm2(properties, log_path)  # A->B stays stopped; B->A copies the results to A
    try:
        await read_all(a, f"B.{results}", expect=10, timeout=90)
        await asyncio.sleep(5)  # several topic refreshes: a stopped A->B must copy nothing more
        assert sum(len(r) for r in (await read_all(b, remote_orders)).values()) == 300

        back = cli("failback", str(properties), "--flow", "A->B", "--groups", f"{prefix}-.*", "--resume-flow",
                   "--stop-reverse-flow")
        assert back.returncode == 0, back.stdout + back.stderr
        assert rpo_row(back.stdout, results)[0] == 0
        on_a_app = await group_offsets(a, app)
        b_copies = await read_all(b, remote_orders)
        for p, position in ((0, 80), (1, 90), (2, 100)):
            truth = exact_position(contents(b_copies[p]), position, contents(on_a[p]))
            assert on_a_app[TopicPartition(orders, p)] == truth, (p, back.stdout)
        results_a, results_b = await read_all(a, f"B.{results}"), await read_all(b, results)
        on_a_reporter = await group_offsets(a, reporter)
        for p, position in ((0, 3), (1, 2)):
            truth = exact_position(contents(results_b[p]), position, contents(results_a[p]))
            assert on_a_reporter[TopicPartition(f"B.{results}", p)] == truth
        assert "connector MirrorSourceConnector of flow A->B: resumed" in back.stdout
        # resumed: A->B copies the records A received while it was stopped
        await read_all(b, remote_orders, expect=320, timeout=90)
        # B->A was stopped by the failback: a new result stays on B ...
        assert "connector MirrorSourceConnector of flow B->A: stopped" in back.stdout
        await produce(b, results, [(0, b"late", b"result-late", [], None)])
        await asyncio.sleep(5)
        assert sum(len(r) for r in (await read_all(a, f"B.{results}")).values()) == 10
        # ... until a failover that starts the reverse flow again (no group matches: only that step runs)
        restart = cli("failover", str(properties), "--flow", "A->B", "--groups", "no-such-group",
                      "--start-reverse-flow")
        assert restart.returncode == 0, restart.stdout + restart.stderr
        assert "connector MirrorSourceConnector of flow B->A: resumed" in restart.stdout
        await read_all(a, f"B.{results}", expect=11, timeout=60)
    finally:
        stop(mm2)


def test_flow_failover_bad_input_is_one_line(tmp_path, cluster_a, cluster_b):
    properties = tmp_path / "mm2.properties"
    properties.write_text(f"clusters = A, B\nA.bootstrap.servers = {cluster_a.bootstrap_servers}\n"
                          f"B.bootstrap.servers = {cluster_b.bootstrap_servers}\nA->B.enabled = true\n")
    cases = {
        ("--flow", "A->C"): "unknown cluster alias(es) C",
        ("--flow", "A-B"): "expected SOURCE->TARGET",
        ("--flow", "A->B", "--groups", "app-(["): "--groups 'app-([' is not a valid regular expression",
        (): "--flow SOURCE->TARGET is required",
    }
    for extra, expected in cases.items():
        result = cli("failover", str(properties), *extra)
        assert result.returncode == 1, result.stdout
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("mirrorline: error: ") and expected in last, last
