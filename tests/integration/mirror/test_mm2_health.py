"""``mirrorline mm2 --listeners``: /health and /metrics for Kubernetes probes and Prometheus."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys

import aiohttp
import pytest

from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.mm2 import isolated_state

pytestmark = pytest.mark.integration


def write_properties(path, cluster_a, cluster_b, state: str, extra: str = "") -> None:
    """An mm2.properties for flow A->B whose groups and internal topics are named after ``state``."""
    path.write_text(f"""clusters = A, B
A.bootstrap.servers = {cluster_a.bootstrap_servers}
B.bootstrap.servers = {cluster_b.bootstrap_servers}
A->B.enabled = true
A->B.topics = {state}-.*
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5
{isolated_state(state)}{extra}""")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def mm2(*args: str, log_path) -> subprocess.Popen:
    with open(log_path, "a") as output:
        return subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "mm2", *map(str, args)],
                                stdout=output, stderr=subprocess.STDOUT, text=True)


async def test_health_turns_ready_once_every_flow_is_assigned_and_metrics_are_served(
        cluster_a, cluster_b, unique_name, tmp_path):
    state = unique_name("health")
    port = free_port()
    # the file names a port that is not free: --listeners wins over the file's listeners
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        write_properties(tmp_path / "mm2.properties", cluster_a, cluster_b, state,
                         f"listeners = http://127.0.0.1:{taken.getsockname()[1]}\n")
        proc = mm2(tmp_path / "mm2.properties", "--listeners", f"http://127.0.0.1:{port}",
                   log_path=tmp_path / "mm2.log")
    base = f"http://127.0.0.1:{port}"
    seen: list[tuple[int, dict]] = []
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            deadline = asyncio.get_running_loop().time() + 90
            while not seen or seen[-1][0] != 200:
                assert proc.poll() is None, (tmp_path / "mm2.log").read_text()[-3000:]
                assert asyncio.get_running_loop().time() < deadline, f"/health never became 200: {seen[-3:]}"
                try:
                    async with http.get(f"{base}/health") as response:
                        seen.append((response.status, await response.json()))
                except aiohttp.ClientConnectionError:
                    pass  # not listening yet: the process first checks that both clusters answer
                await asyncio.sleep(0.05)
            starting = [body for status, body in seen if status == 503]
            assert starting, f"/health was never 503 while the flows started: {seen[:3]}"
            assert starting[0]["status"] == "starting"
            assert set(starting[0]["workers"]) == {"A->B", "B->A"}
            assert any(flow in starting[0]["message"] for flow in ("A->B", "B->A")), starting[0]
            healthy = seen[-1][1]
            assert healthy["status"] == "healthy"
            assert {w["status"] for w in healthy["workers"].values()} == {"healthy"}

            async with http.get(f"{base}/metrics") as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain")
                metrics = await response.text()
            epochs = [line for line in metrics.splitlines() if line.startswith("kafka_connect_worker_rebalance_epoch{")]
            assert any('worker_id="A->B@' in line for line in epochs), epochs
            async with http.get(f"{base}/") as response:
                assert response.status == 200 and set(await response.json()) == {"version", "workers"}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(90)
    assert code == 0, (tmp_path / "mm2.log").read_text()[-3000:]


def test_a_taken_port_is_a_one_line_error(cluster_a, cluster_b, unique_name, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # the file's top-level listeners is honoured when there is no --listeners
        write_properties(tmp_path / "mm2.properties", cluster_a, cluster_b, unique_name("taken"),
                         f"listeners = http://127.0.0.1:{port}\n")
        result = subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(tmp_path / "mm2.properties")],
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("mirrorline: error: cannot serve") and f"127.0.0.1:{port}" in last, last
    assert "Address already in use" in last, last
